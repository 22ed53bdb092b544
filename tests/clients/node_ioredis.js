'use strict';
// ioredis against cellgate, compared with the same calls straight against
// Redis. Default client options, as an application would create it.
//
//   node node_ioredis.js ioredis     (the pinned ioredis 6: offers RESP3 with
//                                     HELLO 3, falls back to RESP2 on NOPROTO)
//   node node_ioredis.js ioredis5    (the pinned ioredis 5: RESP2 only)
// Environment: PROXY_PORT, REDIS_PORT, CG_MODE, DIRECT_TAG, NODE_PORTS (see
// harness.js).
const H = require('./harness');

const MOD = process.argv[2] || 'ioredis';
const Redis = require(MOD);
const VERSION = require(`${MOD}/package.json`).version;
const TAG = `ioredis${VERSION.split('.')[0]}`;
const only = process.argv.slice(3);

const opened = [];
function connect(port) {
  const r = new Redis(port, H.HOST, H.TLS_CA ? { tls: { ca: H.TLS_CA } } : {}); // default options
  r.on('error', () => {}); // reconnects are reported by the failing checks
  opened.push(r);
  return r;
}

function target(label, port, prefix) {
  const t = { label, port, prefix, r: connect(port) };
  t.k = (name) => prefix + name;
  t.other = () => connect(port);
  t.strip = (s) => (typeof s === 'string' ? s.split(prefix).join('') : s);
  return t;
}

const T = {
  direct: target('redis', H.REDIS_PORT, `${H.DIRECT_TAG}${TAG}:d:`),
  proxy: target('cellgate', H.PROXY_PORT, `${TAG}:p:`),
};
const same = (sc, exp) => H.same(T, sc, exp);
const check = (name, fn) => H.check(`${TAG}: ${name}`, fn);

check('connects with default options', async () => {
  await same(async (t) => {
    await H.withTimeout(t.r.status === 'ready' ? Promise.resolve() : H.nextEvent(t.r, 'ready'), 5000, `${t.label} ready`);
    return t.r.status;
  }, 'ready');
  // Which protocol ioredis ended up with (6.x offers RESP3 first).
  const proto = (t) => (t.r.condition && t.r.condition.protocol) || 2;
  console.log(`# ${TAG} ${VERSION}: protocol through cellgate ${proto(T.proxy)}, straight to Redis ${proto(T.direct)}`);
});

check('20 clients with default options use only cellgate\'s shared upstream connections', async () => {
  await H.connCount(TAG, `${MOD} clients`, async (i) => {
    const r = new Redis(H.PROXY_PORT, H.HOST, H.TLS_CA ? { tls: { ca: H.TLS_CA } } : {}); // default options
    r.on('error', () => {});
    await r.set(T.proxy.k(`cc:${i}`), String(i));
    H.expect(await r.get(T.proxy.k(`cc:${i}`)) === String(i), `client ${i} read back a wrong value`);
    await r.incr(T.proxy.k('cc:n'));
    return r;
  }, (r) => r.disconnect());
});

check('ping and echo', async () => {
  await same(async (t) => [await t.r.ping(), await t.r.ping('hi'), await t.r.echo('hello'),
    await t.r.echoBuffer(Buffer.from([0, 13, 10, 255]))],
  ['PONG', 'hi', 'hello', Buffer.from([0, 13, 10, 255])]);
});

check('strings', async () => {
  await same(async ({ r, k }) => [
    await r.set(k('s'), 'v1'), await r.get(k('s')), await r.get(k('missing')),
    await r.set(k('s'), 'x', 'NX'), await r.getset(k('s'), 'v2'), await r.append(k('s'), '!'),
    await r.strlen(k('s')), await r.getrange(k('s'), 0, 1),
    await r.mset(k('m1'), 'a', k('m2'), ''), await r.mget(k('m1'), k('m2'), k('nope')),
    await r.setnx(k('n'), '1'), await r.getdel(k('n')), await r.exists(k('n'), k('m1'), k('nope')),
    await r.del(k('m1'), k('m2')), await r.type(k('s')),
  ], ['OK', 'v1', null, null, 'v1', 3, 3, 'v2', 'OK', ['a', '', null], 1, '1', 1, 2, 'string']);
});

check('binary values', async () => {
  const all = Buffer.from([...Array(256).keys()]);
  const tricky = Buffer.from('$5\r\nhello\r\n*2\r\n+OK\r\n-ERR x\r\n:1\r\n');
  const big = Buffer.alloc(1 << 20);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) & 0xff;
  await same(async ({ r, k }) => {
    await r.set(k('b:all'), all);
    await r.set(k('b:tricky'), tricky);
    await r.set(k('b:big'), big);
    await r.set(Buffer.concat([Buffer.from(k('b:')), Buffer.from([0, 13, 10, 200])]), 'binkey');
    return [(await r.getBuffer(k('b:all'))).equals(all), (await r.getBuffer(k('b:tricky'))).equals(tricky),
      (await r.getBuffer(k('b:big'))).equals(big), await r.strlen(k('b:big')),
      await r.get(Buffer.concat([Buffer.from(k('b:')), Buffer.from([0, 13, 10, 200])])),
      await r.hset(k('b:h'), Buffer.from([255, 0]), all),
      (await r.hgetBuffer(k('b:h'), Buffer.from([255, 0]))).equals(all)];
  }, [true, true, true, 1 << 20, 'binkey', 1, true]);
});

check('counters', async () => {
  await same(async ({ r, k }) => [await r.incr(k('c')), await r.incrby(k('c'), 41),
    await r.decr(k('c')), await r.decrby(k('c'), 2), await r.incrbyfloat(k('f'), '1.5'),
    await r.get(k('c'))], [1, 42, 41, 39, '1.5', '39']);
});

check('hashes', async () => {
  await same(async ({ r, k }) => [
    await r.hset(k('h'), { f1: '1', f2: 'two' }), await r.hget(k('h'), 'f2'),
    await r.hgetall(k('h')), await r.hincrby(k('h'), 'f1', 10), await r.hlen(k('h')),
    await r.hdel(k('h'), 'f2', 'nope'), await r.hmget(k('h'), 'f1', 'nope'),
    await r.hexists(k('h'), 'f1'), await r.hgetall(k('empty')),
  ], [2, 'two', { f1: '1', f2: 'two' }, 11, 2, 1, ['11', null], 1, {}]);
});

check('lists', async () => {
  await same(async ({ r, k }) => [
    await r.rpush(k('l'), 'a', 'b', 'c'), await r.lpush(k('l'), 'z'), await r.lrange(k('l'), 0, -1),
    await r.llen(k('l')), await r.lindex(k('l'), -1), await r.lpop(k('l')), await r.rpop(k('l')),
    await r.lpop(k('l'), 5), await r.lpop(k('l')), await r.rpush(k('{l}2'), 1, 2, 3),
    await r.lmove(k('{l}2'), k('{l}3'), 'LEFT', 'RIGHT'), await r.lrange(k('{l}3'), 0, -1),
  ], [3, 4, ['z', 'a', 'b', 'c'], 4, 'c', 'z', 'c', ['a', 'b'], null, 3, '1', ['1']]);
});

check('sets', async () => {
  await same(async ({ r, k }) => [
    await r.sadd(k('{set}'), 'a', 'b', 'c'), (await r.smembers(k('{set}'))).sort(),
    await r.sismember(k('{set}'), 'b'), await r.srem(k('{set}'), 'a'), await r.scard(k('{set}')),
    await r.sadd(k('{set}2'), 'b', 'd'), (await r.sinter(k('{set}'), k('{set}2'))).sort(),
    (await r.sunion(k('{set}'), k('{set}2'))).sort(), await r.smembers(k('nope')),
  ], [3, ['a', 'b', 'c'], 1, 1, 2, 2, ['b'], ['b', 'c', 'd'], []]);
});

check('sorted sets with scores', async () => {
  await same(async ({ r, k }) => [
    await r.zadd(k('z'), 1, 'a', 2.5, 'b', -3, 'c'), await r.zrange(k('z'), 0, -1, 'WITHSCORES'),
    await r.zscore(k('z'), 'b'), await r.zincrby(k('z'), 2, 'a'), await r.zrank(k('z'), 'a'),
    await r.zrevrange(k('z'), 0, 0, 'WITHSCORES'), await r.zrangebyscore(k('z'), '(0', '+inf'),
    await r.zcard(k('z')), await r.zpopmin(k('z')), await r.zrem(k('z'), 'a', 'nope'),
  ], [3, ['c', '-3', 'a', '1', 'b', '2.5'], '2.5', '3', 2, ['a', '3'], ['b', 'a'], 3, ['c', '-3'], 1]);
});

check('expiry', async () => {
  await same(async ({ r, k }) => {
    await r.set(k('e'), 'v', 'EX', 100);
    const ttl = await r.ttl(k('e'));
    await r.pexpire(k('e'), 50000);
    const pttl = await r.pttl(k('e'));
    const per = await r.persist(k('e'));
    await r.set(k('short'), 'v', 'PX', 60);
    await H.sleep(300);
    return [ttl > 0 && ttl <= 100, pttl > 40000 && pttl <= 50000, per, await r.ttl(k('e')),
      await r.get(k('short')), await r.ttl(k('nope')), await r.expire(k('nope'), 5)];
  }, [true, true, 1, -1, null, -2, 0]);
});

check('pipeline of 1000 commands', async () => {
  const res = await same(async ({ r, k }) => {
    const p = r.pipeline();
    for (let i = 0; i < 1000; i++) {
      if (i % 3 === 0) p.set(k(`pl:${i}`), `v${i}`);
      else if (i % 3 === 1) p.get(k(`pl:${i - 1}`));
      else p.incr(k('pl:n'));
    }
    return p.exec();
  });
  for (let i = 0; i < 1000; i++) {
    const want = i % 3 === 0 ? 'OK' : i % 3 === 1 ? `v${i - 1}` : (i + 1) / 3;
    H.expect(res[i][0] === null && res[i][1] === want, `reply ${i}: ${H.short(res[i])}, wanted ${want}`);
  }
});

check('1000 concurrent commands on one connection', async () => {
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
  const flat = (res) => res && res.map(([e, v]) => (e ? ['error', e.message] : v));
  await same(async ({ r, k }) => {
    await r.set(k('{tx}:s'), 'x');
    return [
      flat(await r.multi().set(k('{tx}:a'), '1').incr(k('{tx}:a')).get(k('{tx}:a')).lpush(k('{tx}:l'), 'x').exec()),
      flat(await r.multi().incr(k('{tx}:s')).set(k('{tx}:b'), '2').exec()),
      await r.get(k('{tx}:b')),
      await H.errorOf(r.multi().set(k('{tx}:c'), '1').call('SET', k('{tx}:d')).exec()) !== null,
      await r.exists(k('{tx}:c')),
    ];
  }, [['OK', 2, '2', 1], [['error', 'ERR value is not an integer or out of range'], 'OK'], '2', true, 0]);
});

check('WATCH + optimistic transaction retry', async () => {
  await same(async (t) => {
    const key = t.k('w:counter');
    const r = t.other(); // a dedicated connection for the WATCH flow
    const intruder = t.other();
    await t.r.set(key, 10);
    const attempts = [];
    for (let i = 0; i < 5; i++) {
      await r.watch(key);
      const v = Number(await r.get(key));
      attempts.push(v);
      if (attempts.length === 1) await intruder.incr(key);
      const res = await r.multi().set(key, v + 1).exec();
      if (res !== null) break;
    }
    const out = [attempts, await t.r.get(key)];
    r.disconnect();
    intruder.disconnect();
    return out;
  }, [[10, 11], '12']);
});

check('pub/sub subscribe, publish from another connection, receive', async () => {
  await same(async (t) => {
    const sub = t.other();
    const pub = t.other();
    const ch = t.k('chan');
    const n = await sub.subscribe(ch);
    const got = H.nextEvent(sub, 'message');
    const receivers = await pub.publish(ch, 'hello');
    const [mch, msg] = await got;
    await sub.psubscribe(t.k('pat*'));
    const pgot = H.nextEvent(sub, 'pmessage');
    const preceivers = await pub.publish(t.k('pat-1'), Buffer.from([0, 1, 2]));
    const [pat, pch, pmsg] = await pgot;
    const numsub = await pub.pubsub('NUMSUB', ch);
    await sub.unsubscribe(ch);
    await sub.punsubscribe();
    const afterUnsub = await pub.publish(ch, 'nobody');
    const back = await sub.ping(); // a normal connection again
    sub.disconnect();
    pub.disconnect();
    return [n, receivers, t.strip(mch), msg, preceivers, t.strip(pat), t.strip(pch), Buffer.from(pmsg),
      t.strip(numsub[0]), numsub[1], afterUnsub, back];
  }, [1, 1, 'chan', 'hello', 1, 'pat*', 'pat-1', Buffer.from([0, 1, 2]), 'chan', 1, 0, 'PONG']);
});

check('BLPOP served by a push from another connection', async () => {
  await same(async (t) => {
    const blocker = t.other();
    const key = t.k('bl:q');
    const waiting = blocker.blpop(key, 4);
    await H.sleep(300);
    const pushed = await t.r.rpush(key, 'job-1');
    const v = await H.withTimeout(waiting, 6000, `${t.label} BLPOP`);
    const timedOut = await blocker.blpop(t.k('bl:empty'), 1);
    blocker.disconnect();
    return [pushed, [t.strip(v[0]), v[1]], timedOut];
  }, [1, ['bl:q', 'job-1'], null]);
});

check('client setname / getname', async () => {
  await same(async (t) => {
    const r = t.other();
    const out = [await r.client('GETNAME'), await r.client('SETNAME', 'io-app'), await r.client('GETNAME'),
      await H.errorOf(r.client('SETNAME', 'bad name'))];
    r.disconnect();
    return out;
  }, [null, 'OK', 'io-app', ['ReplyError', 'ERR Client names cannot contain spaces, newlines or special characters.']]);
});

check('error replies reject with ReplyError', async () => {
  await same(async ({ r, k }) => {
    await r.set(k('err'), 'abc');
    return [await H.errorOf(r.incr(k('err'))), await H.errorOf(r.lpush(k('err'), 'x')),
      await H.errorOf(r.call('NOSUCHCOMMAND', 'a')) !== null, await r.get(k('err'))];
  }, [['ReplyError', 'ERR value is not an integer or out of range'],
    ['ReplyError', 'WRONGTYPE Operation against a key holding the wrong kind of value'], true, 'abc']);
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
  H.expect(/used_memory:/.test(await T.proxy.r.info('memory')), 'INFO memory lacks used_memory');
});

check('scanStream over a few hundred keys', async () => {
  await same(async ({ r, k, strip }) => {
    const p = r.pipeline();
    for (let i = 0; i < 300; i++) p.set(k(`scan:${i}`), i);
    for (let i = 0; i < 200; i++) p.hset(k('scan-h'), `f${i}`, i);
    await p.exec();
    const keys = [];
    for await (const batch of r.scanStream({ match: k('scan:*'), count: 50 })) keys.push(...batch);
    const fields = [];
    for await (const batch of r.hscanStream(k('scan-h'), { count: 20 })) fields.push(...batch);
    const uniq = new Set(keys.map(strip));
    return [uniq.size, [...uniq].every((x) => /^scan:\d+$/.test(x)), fields.length / 2];
  }, [300, true, 200]);
});

check('Lua via defineCommand (EVALSHA with EVAL fallback)', async () => {
  await same(async ({ r, k }) => {
    if (!r.cgIncr) r.defineCommand('cgIncr', { numberOfKeys: 1, lua: "return redis.call('INCRBY', KEYS[1], ARGV[1])" });
    return [await r.cgIncr(k('lua'), 5), await r.cgIncr(k('lua'), 5),
      await r.eval('return {KEYS[1] == KEYS[1], ARGV[1]}', 1, k('x'), 'arg')];
  }, [5, 10, [1, 'arg']]);
});

(async () => {
  let failed = 1;
  try {
    failed = await H.runAll(only);
  } finally {
    for (const r of opened) r.disconnect();
    process.exit(failed ? 1 : 0);
  }
})();
