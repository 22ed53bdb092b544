'use strict';
// Shared by the Node client scripts: checks that print `ok - name` or
// `not ok - name: why`, each bounded by a timeout, and comparison of a
// scenario run straight against Redis with the same scenario through cellgate.
const assert = require('node:assert');
const path = require('node:path');
const { execFile } = require('node:child_process');
const util = require('node:util');

const HOST = '127.0.0.1';
const PROXY_PORT = Number(process.env.PROXY_PORT);
const REDIS_PORT = Number(process.env.REDIS_PORT);
// Cluster mode (run.sh): REDIS_PORT is the master that owns the hash tag
// DIRECT_TAG, which every direct key carries; keys through cellgate spread
// over every master, except those a command needs on one node (they share a
// tag in their name).
const CLUSTER = process.env.CG_MODE === 'cluster';
const DIRECT_TAG = process.env.DIRECT_TAG || '';
const NODE_PORTS = (process.env.NODE_PORTS || String(REDIS_PORT)).split(',').map(Number);
// The masters' INFO tcp_port (their plain ports: the TLS modes' NODE_PORTS
// are their tls-ports).
const INFO_PORTS = (process.env.NODE_INFO_PORTS || NODE_PORTS.join(',')).split(',').map(Number);
const CHECK_TIMEOUT_MS = 10000;
// TLS modes (run.sh): every connection, to cellgate and to Redis, speaks TLS
// and checks the server's certificate against this CA.
const TLS_CA = process.env.CG_TLS_CA ? require('node:fs').readFileSync(process.env.CG_TLS_CA) : null;

const checks = [];
function check(name, fn, timeoutMs = CHECK_TIMEOUT_MS) {
  checks.push({ name, fn, timeoutMs });
}

class Fail extends Error {}
function expect(cond, why) {
  if (!cond) throw new Fail(why);
}

// Buffers compare by content and print as hex; everything else as is.
function plain(v) {
  if (Buffer.isBuffer(v)) return { buffer: v.toString('hex') };
  if (v instanceof Error) return { error: v.constructor.name, message: v.message };
  if (Array.isArray(v)) return v.map(plain);
  if (v instanceof Map) return { map: [...v].map(plain) };
  if (v instanceof Set) return { set: [...v].map(plain).sort() };
  if (v && typeof v === 'object') {
    const o = {};
    for (const k of Object.keys(v)) o[k] = plain(v[k]);
    return o;
  }
  return v;
}

function short(v, n = 300) {
  const s = util.inspect(plain(v), { depth: 6, breakLength: Infinity, maxArrayLength: 20 });
  return s.length <= n ? s : `${s.slice(0, n)}...(${s.length} chars)`;
}

function isEqual(a, b) {
  try {
    assert.deepStrictEqual(plain(a), plain(b));
    return true;
  } catch {
    return false;
  }
}

// targets: {direct, proxy}, each {label, prefix, k(name), ...client handles}.
async function same(targets, scenario, expected) {
  const d = await scenario(targets.direct);
  const p = await scenario(targets.proxy);
  if (expected !== undefined) {
    expect(isEqual(d, expected), `direct Redis gave ${short(d)}, test expects ${short(expected)} (test bug?)`);
  }
  expect(isEqual(p, d), `through cellgate ${short(p)}, straight to Redis ${short(d)}`);
  return p;
}

// The error a promise rejected with, as [class name, message], or null.
async function errorOf(promiseOrFn) {
  try {
    await (typeof promiseOrFn === 'function' ? promiseOrFn() : promiseOrFn);
  } catch (e) {
    // ioredis 6 raises SimpleError (name "ReplyError") on RESP3 and
    // ReplyError on RESP2: name is what applications see.
    return [e.name && e.name !== 'Error' ? e.name : e.constructor.name, e.message];
  }
  return null;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, rej) => {
      timer = setTimeout(() => rej(new Fail(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

// Resolves with the first event emitter callback arguments matching pred.
function nextEvent(emitter, event, pred = () => true, ms = 5000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.removeListener(event, on);
      reject(new Fail(`no '${event}' event within ${ms} ms`));
    }, ms);
    function on(...args) {
      if (!pred(...args)) return;
      clearTimeout(timer);
      emitter.removeListener(event, on);
      resolve(args);
    }
    emitter.on(event, on);
  });
}

// cellgate's connections on every Redis node (upstream_conns.sh):
// { ok, line }, ok false when a node sees more than the limit.
function upstreamConns() {
  return new Promise((resolve) => {
    execFile('bash', [path.join(__dirname, 'upstream_conns.sh')], { timeout: 30000 }, (err, stdout) => {
      resolve({ ok: !err, line: String(stdout).trim() || (err && err.message) });
    });
  });
}

// The connection-count check: `open(i)` opens one client with the library's
// default options and runs a few ordinary commands on it; all 20 stay
// connected while the nodes are asked; `close(c)` closes one.
async function connCount(tag, what, open, close) {
  const clients = [];
  try {
    for (let i = 0; i < 20; i++) clients.push(await open(i));
    const { ok, line } = await upstreamConns();
    console.log(`# ${tag}: cellgate's connections per Redis node, 20 ${what} open: ${line}`);
    expect(ok, `too many connections from cellgate: ${line}`);
  } finally {
    for (const c of clients) {
      try { await close(c); } catch { /* already closed */ }
    }
  }
}

async function runAll(only) {
  let failed = 0;
  for (const { name, fn, timeoutMs } of checks) {
    if (only.length && !only.some((o) => name.includes(o))) continue;
    try {
      await withTimeout(Promise.resolve().then(fn), timeoutMs, 'check');
      console.log(`ok - ${name}`);
    } catch (e) {
      failed++;
      const why = e instanceof Fail ? e.message : `${e.constructor.name}: ${e.message}`;
      console.log(`not ok - ${name}: ${why.replace(/\r?\n/g, ' | ')}`);
    }
  }
  return failed;
}

module.exports = {
  HOST, PROXY_PORT, REDIS_PORT, TLS_CA, INFO_PORTS, CLUSTER, DIRECT_TAG, NODE_PORTS, upstreamConns, connCount, check, expect, Fail, same, errorOf, sleep,
  withTimeout, nextEvent, runAll, short, isEqual,
};
