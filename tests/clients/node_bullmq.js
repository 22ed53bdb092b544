'use strict';
// BullMQ (a job queue on Redis, npm `bullmq`, pinned in package.json) through
// cellgate: a Queue adds 200 jobs, a Worker processes them, a QueueEvents
// follows them (XREAD BLOCK on the events stream); every job must complete
// with the right result.
//
// The connection is the plain one BullMQ documents for a Redis server,
// `connection: { host, port }` (BullMQ makes its ioredis connections from
// it; ioredis is the pinned `ioredis` of package.json): cellgate presents
// itself as a standalone Redis. BullMQ's Lua scripts take several keys of
// one queue (`bull:<queue>:wait`, `...:meta`, `...:events`, ...), which lie
// in different hash slots unless the prefix is a hash tag: BullMQ's own
// Redis Cluster advice is `prefix: '{bull}'`. The 200 jobs run with
// prefix '{bull}' in both modes, and with the default prefix in single mode;
// in cluster mode the default prefix must get -CROSSSLOT (a clean refusal:
// the scripts' keys span slots, as they would on Redis Cluster itself).
//
//   node node_bullmq.js [check name filter...]
// Environment: PROXY_PORT, CG_MODE, NODE_PORTS, CG_PID (see harness.js).
const H = require('./harness');
const { Queue, Worker, QueueEvents } = require('bullmq');

const VERSION = require('bullmq/package.json').version;
const IOREDIS_VERSION = require('ioredis/package.json').version;
const TAG = 'bullmq';
const only = process.argv.slice(2);
const check = (name, fn, ms) => H.check(`${TAG}: ${name}`, fn, ms);
const connection = { host: H.HOST, port: H.PROXY_PORT };
const JOBS = 200;

console.log(`# bullmq ${VERSION} on ioredis ${IOREDIS_VERSION}`);

// Closes BullMQ objects without letting a stuck close hang the part.
async function closeAll(objs) {
  for (const o of objs) {
    try {
      await H.withTimeout(o.close(), 5000, 'close');
    } catch { /* reported by the check that failed */ }
  }
}

// 200 jobs: half added one by one (Queue.add), half with addBulk. Every
// 40th job throws on its first attempt and is retried (attempts: 2).
async function roundTrip(prefix) {
  const name = `cg-${H.CLUSTER ? 'cluster' : 'single'}-${process.pid}-${prefix ? 'tagged' : 'plain'}`;
  const opts = prefix ? { connection, prefix } : { connection };
  const queue = new Queue(name, opts);
  const events = new QueueEvents(name, opts);
  const errors = [];
  queue.on('error', (e) => errors.push(`queue: ${e.message}`));
  events.on('error', (e) => errors.push(`events: ${e.message}`));
  let worker = null;
  try {
    await H.withTimeout(events.waitUntilReady(), 5000, 'QueueEvents ready');
    let eventCompleted = 0;
    events.on('completed', () => { eventCompleted++; });

    const results = new Map();
    let failedAttempts = 0;
    let resolveDone;
    const done = new Promise((res) => { resolveDone = res; });
    worker = new Worker(name, async (job) => {
      if (job.data.n % 40 === 0 && job.attemptsMade === 0) throw new Error(`job ${job.data.n}: first attempt fails`);
      return { n: job.data.n, double: job.data.n * 2 };
    }, { ...opts, concurrency: 8 });
    worker.on('error', (e) => errors.push(`worker: ${e.message}`));
    worker.on('failed', () => { failedAttempts++; });
    worker.on('completed', (job, rv) => {
      results.set(job.data.n, rv);
      if (results.size === JOBS) resolveDone();
    });

    for (let n = 0; n < JOBS / 2; n++) {
      await queue.add('double', { n }, { attempts: 2 });
    }
    await queue.addBulk(Array.from({ length: JOBS / 2 }, (_, j) => ({
      name: 'double', data: { n: JOBS / 2 + j }, opts: { attempts: 2 },
    })));
    try {
      await H.withTimeout(done, 30000, `${JOBS} jobs completed`);
    } catch (e) {
      throw new H.Fail(`${results.size} of ${JOBS} jobs completed in 30 s; errors: ${errors.slice(0, 3).join(' | ') || 'none'}`);
    }
    for (let i = 0; i < 50 && eventCompleted < JOBS; i++) await H.sleep(100);

    const counts = await queue.getJobCounts('completed', 'failed', 'waiting', 'active', 'delayed');
    const jobs = await queue.getJobs(['completed'], 0, -1);
    const wrong = jobs.filter((j) => !j.returnvalue || j.returnvalue.double !== j.data.n * 2);
    const retried = jobs.filter((j) => j.data.n % 40 === 0).map((j) => j.attemptsMade).sort();
    H.expect(H.isEqual(counts, { completed: JOBS, failed: 0, waiting: 0, active: 0, delayed: 0 }),
      `job counts ${H.short(counts)}`);
    H.expect(jobs.length === JOBS, `${jobs.length} completed jobs listed`);
    H.expect(wrong.length === 0, `${wrong.length} jobs with a wrong result, e.g. ${H.short(wrong[0] && [wrong[0].data, wrong[0].returnvalue])}`);
    H.expect([...results.values()].every((rv) => rv.double === rv.n * 2), 'a Worker completed event with a wrong result');
    H.expect(failedAttempts === JOBS / 40, `${failedAttempts} failed attempts, wanted ${JOBS / 40}`);
    H.expect(H.isEqual(retried, Array(JOBS / 40).fill(2)), `attempts of the retried jobs: ${H.short(retried)}`);
    H.expect(eventCompleted === JOBS, `QueueEvents saw ${eventCompleted} completed events, wanted ${JOBS}`);
    H.expect(errors.length === 0, `errors: ${errors.slice(0, 3).join(' | ')}`);
    await H.withTimeout(queue.obliterate({ force: true }), 5000, 'obliterate');
  } finally {
    await closeAll([worker, events, queue].filter(Boolean));
  }
}

if (!H.CLUSTER) {
  check(`${JOBS} jobs through a Queue and a Worker (plain connection, default prefix)`, () => roundTrip(null), 45000);
} else {
  // The default prefix cannot work on a Redis Cluster, behind cellgate or
  // not: BullMQ's scripts take keys of several slots. What cellgate owes is
  // a clean refusal, Redis Cluster's own -CROSSSLOT, on the first add.
  check('default prefix: the first add is refused with CROSSSLOT (the queue\'s keys span slots)', async () => {
    const queue = new Queue(`cg-crossslot-${process.pid}`, { connection });
    queue.on('error', () => {});
    try {
      const e = await H.errorOf(H.withTimeout(queue.add('double', { n: 1 }), 5000, 'add'));
      H.expect(e !== null && /^CROSSSLOT /.test(e[1]), `add gave ${H.short(e)}`);
      console.log(`# ${TAG}: default prefix in cluster mode: ${e[1]} (use prefix '{bull}')`);
    } finally {
      await closeAll([queue]);
    }
  });
}
check(`${JOBS} jobs through a Queue and a Worker (plain connection, prefix '{bull}')`, () => roundTrip('{bull}'), 45000);

// 20 Queues, each its own connection with default options (as 20 producer
// processes would), each adding a job and reading the counts. The prefix is
// '{bull}' so that, in cluster mode too, this check is about connections and
// not about BullMQ's keys spanning slots.
check('20 Queues with default connection options use only cellgate\'s shared upstream connections', async () => {
  const name = `cg-conns-${process.pid}`;
  const queues = [];
  try {
    await H.connCount(TAG, 'BullMQ Queues', async (i) => {
      const q = new Queue(name, { connection, prefix: '{bull}' });
      q.on('error', () => {});
      queues.push(q);
      await q.add('one', { i });
      const counts = await q.getJobCounts('waiting');
      H.expect(counts.waiting >= 1, `queue ${i}: counts ${H.short(counts)}`);
      return q;
    }, async () => {}); // closed below, after obliterate
    await queues[0].obliterate({ force: true });
  } finally {
    await closeAll(queues);
  }
}, 30000);

(async () => {
  let failed = 1;
  try {
    failed = await H.runAll(only);
  } finally {
    process.exit(failed ? 1 : 0);
  }
})();
