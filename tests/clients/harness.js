'use strict';
// Shared by the Node client scripts: checks that print `ok - name` or
// `not ok - name: why`, each bounded by a timeout, and comparison of a
// scenario run straight against Redis with the same scenario through cellgate.
const assert = require('node:assert');
const util = require('node:util');

const HOST = '127.0.0.1';
const PROXY_PORT = Number(process.env.PROXY_PORT);
const REDIS_PORT = Number(process.env.REDIS_PORT);
const CHECK_TIMEOUT_MS = 10000;

const checks = [];
function check(name, fn) {
  checks.push({ name, fn });
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

async function runAll(only) {
  let failed = 0;
  for (const { name, fn } of checks) {
    if (only.length && !only.some((o) => name.includes(o))) continue;
    try {
      await withTimeout(Promise.resolve().then(fn), CHECK_TIMEOUT_MS, 'check');
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
  HOST, PROXY_PORT, REDIS_PORT, check, expect, Fail, same, errorOf, sleep,
  withTimeout, nextEvent, runAll, short, isEqual,
};
