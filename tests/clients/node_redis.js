'use strict';
// node-redis (the `redis` package) against cellgate, compared with the same
// calls straight against Redis.
//
//   node node_redis.js                 (redis 5.x, default options: RESP2)
//   node node_redis.js redis --resp3   (redis 5.x, createClient({ RESP: 3 }))
//   node node_redis.js redis6          (redis 6.x, default options: it opens
//                                       with HELLO 3 and has no RESP2 fallback)
// Further arguments select checks by name. Environment: PROXY_PORT,
// REDIS_PORT, CG_MODE, DIRECT_TAG, NODE_PORTS (see harness.js).
const H = require('./harness');

const args = process.argv.slice(2);
const MOD = args.length && /^redis\d*$/.test(args[0]) ? args.shift() : 'redis';
const WANT_RESP3 = args.includes('--resp3');
const only = args.filter((a) => a !== '--resp3');
const { createClient, RESP_TYPES, WatchError, ErrorReply } = require(MOD);

const VERSION = require(`${MOD}/package.json`).version;
const MAJOR = Number(VERSION.split('.')[0]);
const OPTIONS = WANT_RESP3 ? { RESP: 3 } : {}; // else the defaults
// TLS modes: rediss:// URLs, the server's certificate checked against the CA.
const SCHEME = H.TLS_CA ? 'rediss' : 'redis';
const TLS_SOCKET = H.TLS_CA ? { socket: { tls: true, ca: H.TLS_CA } } : {};
const R3 = WANT_RESP3 || MAJOR >= 6; // node-redis 6 speaks RESP3 by default
const TAG = MAJOR >= 6 ? `node-redis${MAJOR}` : WANT_RESP3 ? 'node-redis-resp3' : 'node-redis';

const opened = [];
async function connect(port) {
  const c = createClient({ url: `${SCHEME}://${H.HOST}:${port}`, ...OPTIONS, ...TLS_SOCKET });
  c.on('error', () => {}); // connection trouble shows up in the failing check
  opened.push(c);
  await H.withTimeout(c.connect(), 5000, `connect to ${port}`);
  return c;
}

async function target(label, port, prefix) {
  const t = { label, port, prefix, r: await connect(port) };
  t.bin = t.r.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
  t.k = (name) => prefix + name;
  t.other = () => connect(port);
  t.strip = (s) => (typeof s === 'string' ? s.split(prefix).join('') : s);
  return t;
}

const T = {};
const same = (sc, exp) => H.same(T, sc, exp);
const check = (name, fn) => H.check(`${TAG}: ${name}`, fn);
const errorOf = async (p) => {
  const e = await H.errorOf(p);
  return e && [e[0], e[1]];
};

check(WANT_RESP3 ? 'connects with RESP: 3' : 'connects with default options', async () => {
  console.log(`# node-redis ${VERSION} (${R3 ? 'RESP3' : 'RESP2'}${WANT_RESP3 ? ', asked for' : ' by default'})`);
  await same(async (t) => t.r.isReady, true);
  // What the server said it speaks: HELLO's map (an array in RESP2).
  await same(async (t) => {
    const hello = await t.r.sendCommand(['HELLO']);
    const get = (f) => (hello instanceof Map ? hello.get(f) : Array.isArray(hello)
      ? hello[hello.indexOf(f) + 1] : hello[f]);
    return Number(get('proto'));
  }, R3 ? 3 : 2);
});

check('20 clients with default options use only cellgate\'s shared upstream connections', async () => {
  await H.connCount(TAG, `${MOD} clients${WANT_RESP3 ? ' (RESP: 3)' : ''}`, async (i) => {
    const c = createClient({ url: `${SCHEME}://${H.HOST}:${H.PROXY_PORT}`, ...OPTIONS, ...TLS_SOCKET });
    c.on('error', () => {});
    await H.withTimeout(c.connect(), 5000, `client ${i} connect`);
    await c.set(T.proxy.k(`cc:${i}`), String(i));
    H.expect(await c.get(T.proxy.k(`cc:${i}`)) === String(i), `client ${i} read back a wrong value`);
    await c.incr(T.proxy.k('cc:n'));
    return c;
  }, (c) => c.destroy());
});

check('ping and echo', async () => {
  await same(async (t) => [await t.r.ping(), await t.r.ping('hi'), await t.r.echo('hello'),
    await t.bin.echo(Buffer.from([0, 13, 10, 255])), await t.r.sendCommand(['ECHO', 'raw'])],
  ['PONG', 'hi', 'hello', Buffer.from([0, 13, 10, 255]), 'raw']);
});

check('strings', async () => {
  await same(async ({ r, k }) => [
    await r.set(k('s'), 'v1'), await r.get(k('s')), await r.get(k('missing')),
    await r.set(k('s'), 'x', { condition: 'NX' }), await r.append(k('s'), '!'), await r.strLen(k('s')),
    await r.getRange(k('s'), 0, 1), await r.mSet([k('m1'), 'a', k('m2'), '']),
    await r.mGet([k('m1'), k('m2'), k('nope')]), await r.setNX(k('n'), '1'), await r.getDel(k('n')),
    await r.exists([k('n'), k('m1')]), await r.del([k('m1'), k('m2')]), await r.type(k('s')),
  ], ['OK', 'v1', null, null, 3, 3, 'v1', 'OK', ['a', '', null], 1, '1', 1, 2, 'string']);
});

check('binary values', async () => {
  const all = Buffer.from([...Array(256).keys()]);
  const tricky = Buffer.from('$5\r\nhello\r\n*2\r\n+OK\r\n-ERR x\r\n:1\r\n');
  const big = Buffer.alloc(1 << 20);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) & 0xff;
  await same(async ({ r, bin, k }) => {
    await r.set(k('b:all'), all);
    await r.set(k('b:tricky'), tricky);
    await r.set(k('b:big'), big);
    return [(await bin.get(k('b:all'))).equals(all), (await bin.get(k('b:tricky'))).equals(tricky),
      (await bin.get(k('b:big'))).equals(big), await r.strLen(k('b:big'))];
  }, [true, true, true, 1 << 20]);
});

check('counters', async () => {
  await same(async ({ r, k }) => [await r.incr(k('c')), await r.incrBy(k('c'), 41), await r.decr(k('c')),
    await r.decrBy(k('c'), 2), await r.incrByFloat(k('f'), 1.5), await r.get(k('c'))],
  [1, 42, 41, 39, '1.5', '39']);
});

check('hashes', async () => {
  await same(async ({ r, k }) => [
    await r.hSet(k('h'), { f1: '1', f2: 'two' }), await r.hGet(k('h'), 'f2'), await r.hGetAll(k('h')),
    await r.hIncrBy(k('h'), 'f1', 10), await r.hLen(k('h')), await r.hDel(k('h'), ['f2', 'nope']),
    await r.hmGet(k('h'), ['f1', 'nope']), await r.hGetAll(k('empty')),
  ], [2, 'two', { f1: '1', f2: 'two' }, 11, 2, 1, ['11', null], {}]);
});

check('lists', async () => {
  await same(async ({ r, k }) => [
    await r.rPush(k('l'), ['a', 'b', 'c']), await r.lPush(k('l'), 'z'), await r.lRange(k('l'), 0, -1),
    await r.lLen(k('l')), await r.lPop(k('l')), await r.rPop(k('l')), await r.lPopCount(k('l'), 5),
    await r.lPop(k('l')),
  ], [3, 4, ['z', 'a', 'b', 'c'], 4, 'z', 'c', ['a', 'b'], null]);
});

check('sets', async () => {
  await same(async ({ r, k }) => [
    await r.sAdd(k('{set}'), ['a', 'b', 'c']), (await r.sMembers(k('{set}'))).sort(),
    await r.sIsMember(k('{set}'), 'b'), await r.sRem(k('{set}'), 'a'), await r.sCard(k('{set}')),
    await r.sAdd(k('{set}2'), ['b', 'd']), await r.sInter([k('{set}'), k('{set}2')]),
  ], [3, ['a', 'b', 'c'], 1, 1, 2, 2, ['b']]);
});

check('sorted sets with scores', async () => {
  await same(async ({ r, k }) => [
    await r.zAdd(k('z'), [{ score: 1, value: 'a' }, { score: 2.5, value: 'b' }, { score: -3, value: 'c' }]),
    await r.zRangeWithScores(k('z'), 0, -1), await r.zScore(k('z'), 'b'), await r.zIncrBy(k('z'), 2, 'a'),
    await r.zRank(k('z'), 'a'), await r.zRangeByScore(k('z'), '(0', '+inf'), await r.zCard(k('z')),
    await r.zPopMin(k('z')),
  ], [3, [{ value: 'c', score: -3 }, { value: 'a', score: 1 }, { value: 'b', score: 2.5 }], 2.5, 3, 2,
    ['b', 'a'], 3, { value: 'c', score: -3 }]);
});

check('expiry', async () => {
  await same(async ({ r, k }) => {
    await r.set(k('e'), 'v', { expiration: { type: 'EX', value: 100 } });
    const ttl = await r.ttl(k('e'));
    await r.pExpire(k('e'), 50000);
    const pttl = await r.pTTL(k('e'));
    const per = await r.persist(k('e'));
    await r.set(k('short'), 'v', { expiration: { type: 'PX', value: 60 } });
    await H.sleep(300);
    return [ttl > 0 && ttl <= 100, pttl > 40000 && pttl <= 50000, per, await r.ttl(k('e')),
      await r.get(k('short')), await r.ttl(k('nope'))];
  }, [true, true, 1, -1, null, -2]);
});

check('pipeline (multi().execAsPipeline) of 1000 commands', async () => {
  const res = await same(async ({ r, k }) => {
    const m = r.multi();
    for (let i = 0; i < 1000; i++) {
      if (i % 3 === 0) m.set(k(`pl:${i}`), `v${i}`);
      else if (i % 3 === 1) m.get(k(`pl:${i - 1}`));
      else m.incr(k('pl:n'));
    }
    return m.execAsPipeline();
  });
  for (let i = 0; i < 1000; i++) {
    const want = i % 3 === 0 ? 'OK' : i % 3 === 1 ? `v${i - 1}` : (i + 1) / 3;
    H.expect(res[i] === want, `reply ${i}: ${H.short(res[i])}, wanted ${want}`);
  }
});

check('1000 concurrent commands (automatic pipelining)', async () => {
  const res = await same(async ({ r, k }) => {
    const ps = [];
    for (let i = 0; i < 500; i++) {
      ps.push(r.set(k(`cc:${i}`), `v${i}`));
      ps.push(r.get(k(`cc:${i}`)));
    }
    return Promise.all(ps);
  });
  for (let i = 0; i < 500; i++) {
    H.expect(res[2 * i] === 'OK' && res[2 * i + 1] === `v${i}`, `pair ${i}: ${H.short(res.slice(2 * i, 2 * i + 2))}`);
  }
});

check('multi/exec', async () => {
  await same(async ({ r, k }) => {
    await r.set(k('{tx}:s'), 'x');
    const ok = await r.multi().set(k('{tx}:a'), '1').incr(k('{tx}:a')).get(k('{tx}:a')).lPush(k('{tx}:l'), 'x').exec();
    const withErr = await errorOf(r.multi().incr(k('{tx}:s')).set(k('{tx}:b'), '2').exec());
    return [ok, withErr && withErr[0], await r.get(k('{tx}:b'))];
  }, [['OK', 2, '2', 1], 'MultiErrorReply', '2']);
});

check('WATCH + optimistic transaction retry', async () => {
  await same(async (t) => {
    const key = t.k('w:counter');
    const r = await t.other(); // a dedicated connection for the WATCH flow
    const intruder = await t.other();
    await t.r.set(key, '10');
    const attempts = [];
    let watchErrors = 0;
    for (let i = 0; i < 5; i++) {
      await r.watch(key);
      const v = Number(await r.get(key));
      attempts.push(v);
      if (attempts.length === 1) await intruder.incr(key);
      try {
        await r.multi().set(key, String(v + 1)).exec();
        break;
      } catch (e) {
        if (!(e instanceof WatchError)) throw e;
        watchErrors++;
      }
    }
    const out = [attempts, watchErrors, await t.r.get(key)];
    r.destroy();
    intruder.destroy();
    return out;
  }, [[10, 11], 1, '12']);
});

check('pub/sub subscribe, publish from another connection, receive', async () => {
  await same(async (t) => {
    const sub = await t.other();
    const ch = t.k('chan');
    let resolveMsg;
    const got = new Promise((res) => { resolveMsg = res; });
    await sub.subscribe(ch, (message, channel) => resolveMsg([message, channel]));
    let resolveP;
    const pgot = new Promise((res) => { resolveP = res; });
    await sub.pSubscribe(t.k('pat*'), (message, channel) => resolveP([message, channel]));
    const receivers = await t.r.publish(ch, 'hello');
    const [msg, mch] = await H.withTimeout(got, 5000, `${t.label} message`);
    const preceivers = await t.r.publish(t.k('pat-1'), 'via pattern');
    const [pmsg, pch] = await H.withTimeout(pgot, 5000, `${t.label} pmessage`);
    const numsub = await t.r.pubSubNumSub(ch);
    await sub.unsubscribe(ch);
    await sub.pUnsubscribe();
    const after = await t.r.publish(ch, 'nobody');
    const back = String(await sub.ping()); // node-redis 5 hands back a Buffer here
    sub.destroy();
    return [receivers, msg, t.strip(mch), preceivers, pmsg, t.strip(pch), numsub[ch], after, back];
  }, [1, 'hello', 'chan', 1, 'via pattern', 'pat-1', 1, 0, 'PONG']);
});

check('BLPOP served by a push from another connection', async () => {
  await same(async (t) => {
    const blocker = await t.other();
    const key = t.k('bl:q');
    const waiting = blocker.blPop(key, 4);
    await H.sleep(300);
    const pushed = await t.r.rPush(key, 'job-1');
    const v = await H.withTimeout(waiting, 6000, `${t.label} BLPOP`);
    const timedOut = await blocker.blPop(t.k('bl:empty'), 1);
    blocker.destroy();
    return [pushed, v && [t.strip(v.key), v.element], timedOut];
  }, [1, ['bl:q', 'job-1'], null]);
});

check('client setName / getName', async () => {
  await same(async (t) => {
    const r = await t.other();
    const out = [await r.clientGetName(), await r.clientSetName('nr-app'), await r.clientGetName(),
      await errorOf(r.clientSetName('bad name'))];
    r.destroy();
    return out;
  }, [null, 'OK', 'nr-app', ['SimpleError', 'ERR Client names cannot contain spaces, newlines or special characters.']]);
});

check('error replies reject with ErrorReply', async () => {
  await same(async ({ r, k }) => {
    await r.set(k('err'), 'abc');
    const e = await r.incr(k('err')).catch((x) => x);
    return [e instanceof ErrorReply, e.message, await errorOf(r.lPush(k('err'), 'x')),
      (await errorOf(r.sendCommand(['NOSUCHCOMMAND', 'a']))) !== null, await r.get(k('err'))];
  }, [true, 'ERR value is not an integer or out of range',
    ['SimpleError', 'WRONGTYPE Operation against a key holding the wrong kind of value'], true, 'abc']);
});

check('info (forwarded)', async () => {
  const field = (info, f) => (info.match(new RegExp(`^${f}:(.*)\\r?$`, 'm')) || [])[1];
  const d = await T.direct.r.info();
  const p = await T.proxy.r.info();
  for (const f of ['redis_version', 'redis_mode', 'tcp_port']) {
    if (f === 'tcp_port' && H.CLUSTER) { // one section per master
      H.expect(H.INFO_PORTS.includes(Number(field(p, f))), `INFO tcp_port: cellgate ${field(p, f)}, masters ${H.INFO_PORTS}`);
      continue;
    }
    H.expect(field(p, f) !== undefined && field(p, f) === field(d, f), `INFO ${f}: cellgate ${field(p, f)}, Redis ${field(d, f)}`);
  }
});

check('scanIterator over a few hundred keys', async () => {
  await same(async ({ r, k, strip }) => {
    const m = r.multi();
    for (let i = 0; i < 300; i++) m.set(k(`scan:${i}`), String(i));
    await m.execAsPipeline();
    const keys = new Set();
    for await (const batch of r.scanIterator({ MATCH: k('scan:*'), COUNT: 50 })) {
      for (const key of [].concat(batch)) keys.add(strip(key));
    }
    return [keys.size, [...keys].every((x) => /^scan:\d+$/.test(x))];
  }, [300, true]);
});

check('Lua EVAL / EVALSHA', async () => {
  await same(async ({ r, k }) => {
    const script = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
    const sha = await r.scriptLoad(script);
    return [await r.eval(script, { keys: [k('lua')], arguments: ['5'] }),
      await r.evalSha(sha, { keys: [k('lua')], arguments: ['5'] }), sha.length];
  }, [5, 10, 40]);
});

// ---------------------------------------------------------------- RESP3 only

if (R3) {
  check('RESP3: ordinary commands on a subscribed connection', async () => {
    await same(async (t) => {
      const sub = await t.other();
      const ch = t.k('r3chan');
      let resolveMsg;
      const got = new Promise((res) => { resolveMsg = res; });
      await sub.subscribe(ch, (message) => resolveMsg(message));
      // RESP3 lets a subscribed connection keep running commands.
      const set = await sub.set(t.k('r3sub'), 'v');
      const get = await sub.get(t.k('r3sub'));
      const receivers = await t.r.publish(ch, 'while busy');
      const msg = await H.withTimeout(got, 5000, `${t.label} message`);
      const hash = await sub.hGetAll(t.k('r3nohash'));
      await sub.unsubscribe(ch);
      const after = await sub.get(t.k('r3sub'));
      sub.destroy();
      return [set, get, receivers, msg, hash, after];
    }, ['OK', 'v', 1, 'while busy', {}, 'v']);
  });

  check('RESP3: client-side cache invalidated by another connection', async () => {
    await same(async (t) => {
      const key = t.k('csc');
      await t.r.set(key, 'old');
      const cached = createClient({ url: `${SCHEME}://${H.HOST}:${t.port}`, RESP: 3, ...TLS_SOCKET,
        clientSideCache: { ttl: 0, maxEntries: 0 } });
      cached.on('error', () => {});
      opened.push(cached);
      await H.withTimeout(cached.connect(), 5000, `${t.label} connect (cache)`);
      const first = await cached.get(key); // a miss: asks the server, tracked
      const second = await cached.get(key); // a hit: served from the cache
      const hits = cached.clientSideCache.stats().hitCount;
      await t.r.set(key, 'new'); // the server pushes an invalidation
      let third = second;
      for (let i = 0; i < 100 && third === 'old'; i++) {
        await H.sleep(20);
        third = await cached.get(key);
      }
      cached.destroy();
      return [first, second, hits, third];
    }, ['old', 'old', 1, 'new']);
  });
}

(async () => {
  let failed = 1;
  try {
    T.direct = await target('redis', H.REDIS_PORT, `${H.DIRECT_TAG}${TAG}:d:`);
    T.proxy = await target('cellgate', H.PROXY_PORT, `${TAG}:p:`);
    failed = await H.runAll(only);
  } catch (e) {
    console.log(`not ok - ${TAG}: setup: ${e.message}`);
  } finally {
    for (const c of opened) {
      try { c.destroy(); } catch { /* already closed */ }
    }
    process.exit(failed ? 1 : 0);
  }
})();
