'use strict';
// An Express app that rate-limits its requests with cellgate the way an
// application would: one `LIMITER CHECK <path> MS HEADERS` per request
// through ioredis (default options), the header pairs of the reply copied
// as they are into the HTTP response, 429 when limited. The checks make
// real HTTP requests to it and read the headers a client would see
// (draft-ietf-httpapi-ratelimit-headers-11: RateLimit-Policy, RateLimit,
// Retry-After). cellgate runs with tests/clients/limits.yaml.
const http = require('node:http');
const H = require('./harness');
const express = require('express');
const Redis = require('ioredis');

const only = process.argv.slice(2);
const redis = new Redis(H.PROXY_PORT, H.HOST, H.TLS_CA ? { tls: { ca: H.TLS_CA } } : {});
redis.on('error', () => {});

const app = express();
app.get('/api/:tenant/:user', async (req, res) => {
  try {
    const path = `app:${req.params.tenant}:user:${req.params.user}`;
    const reply = await redis.call('LIMITER', 'CHECK', path, 'MS', 'HEADERS');
    const [limited, limit, remaining, retryMs, resetMs] = reply;
    for (let i = 5; i + 1 < reply.length; i += 2) res.set(reply[i], reply[i + 1]);
    res.status(limited ? 429 : 200).json({ limit, remaining, retryMs, resetMs });
  } catch (e) {
    res.status(500).json({ error: e.message });
  }
});

let server;
function get(urlPath) {
  return new Promise((resolve, reject) => {
    http.get({ host: H.HOST, port: server.address().port, path: urlPath }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: JSON.parse(body) }));
    }).on('error', reject);
  });
}

// A tenant and a user no earlier run used (the state lives in Redis).
const tenant = `t${process.pid}x${Date.now()}`;
const POLICY = '"app:*";q=100;w=3600, "app:*:user:*";q=2;w=120';

H.check('express: RateLimit headers of an admitted request', async () => {
  const r = await get(`/api/${tenant}/alice`);
  H.expect(r.status === 200, `status ${r.status} ${H.short(r.body)}`);
  H.expect(r.headers['ratelimit-policy'] === POLICY, `RateLimit-Policy ${r.headers['ratelimit-policy']}`);
  H.expect(/^"app:\*:user:\*";r=1;t=(59|60)$/.test(r.headers.ratelimit || ''), `RateLimit ${r.headers.ratelimit}`);
  H.expect(r.headers['retry-after'] === undefined, `Retry-After ${r.headers['retry-after']}`);
  H.expect(r.body.remaining === 1 && r.body.retryMs === -1 && r.body.resetMs > 59000, `body ${H.short(r.body)}`);
});

H.check('express: 429 with Retry-After once the user is limited', async () => {
  const second = await get(`/api/${tenant}/alice`);
  H.expect(second.status === 200 && /;r=0;/.test(second.headers.ratelimit || ''), `2nd ${second.status} ${second.headers.ratelimit}`);
  const r = await get(`/api/${tenant}/alice`);
  H.expect(r.status === 429, `status ${r.status}`);
  H.expect(r.headers['ratelimit-policy'] === POLICY, `RateLimit-Policy ${r.headers['ratelimit-policy']}`);
  H.expect(/^"app:\*:user:\*";r=0;t=(119|120)$/.test(r.headers.ratelimit || ''), `RateLimit ${r.headers.ratelimit}`);
  const ra = Number(r.headers['retry-after']);
  H.expect(ra >= 59 && ra <= 60, `Retry-After ${r.headers['retry-after']}`);
  // MS: the body's retry in milliseconds agrees with the header's seconds.
  H.expect(r.body.retryMs > (ra - 1) * 1000 && r.body.retryMs <= ra * 1000, `retryMs ${r.body.retryMs} vs ${ra}`);
});

H.check('express: another user of the tenant is not limited', async () => {
  const r = await get(`/api/${tenant}/bob`);
  H.expect(r.status === 200 && /^"app:\*:user:\*";r=1;/.test(r.headers.ratelimit || ''), `bob ${r.status} ${r.headers.ratelimit}`);
});

(async () => {
  let failed = 1;
  try {
    server = app.listen(0, H.HOST);
    await new Promise((resolve) => server.once('listening', resolve));
    failed = await H.runAll(only);
  } finally {
    if (server) server.close();
    redis.disconnect();
    process.exit(failed ? 1 : 0);
  }
})();
