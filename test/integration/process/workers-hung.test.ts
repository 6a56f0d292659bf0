/**
 * `server.workers: 2` with a worker that stops answering (SIGSTOP here; a blocked event loop is
 * the same to the primary) or dies at the wrong moment (found by the workers red team):
 *
 * - a worker killed while the primary sums metrics for it no longer ends the primary (and with
 *   it every worker): the sum's answer to a dead worker threw ERR_IPC_CHANNEL_CLOSED, uncaught;
 * - a hung worker is killed after `workerUnresponsiveSeconds` and replaced (its connections hung
 *   for good, and /healthz, answered by the other, said all was well);
 * - a scrape answers with the workers that answered in time (one hung worker made every scrape
 *   a 500 after 5 s), and counts the others in `bff_cluster_workers_unanswered`;
 * - a worker that does not drain in time is named when it is killed.
 *
 * Mutations that fail this file (by hand, once): src/worker-ipc.ts sendToWorker without its
 * `worker.isConnected()` check and callback (`worker.send(message)`) → the first test (the
 * send is tried and fails; without supervisor.ts's Worker error listener too, the primary
 * exits 1); src/supervisor.ts heartbeat never killing (`performance.now() - heard > Infinity`)
 * → the second; createWorkerMetricsGatherer waiting for every worker (`setTimeout(settle, 60_000)`)
 * → the third; the heartbeat without its `late` check (`const late = false`) → the fourth (both
 * workers killed); src/main.ts metricsFromPrimary's wait back at a fixed 10_000 → the fifth; the
 * drain bound's `worker_killed` line removed → the last.
 */
import { logEvents, request, startCliWorkers, useCliFixture, withTimeout, workerPids } from '../../support/cli-process.js';
import { rawExchange } from '../../support/raw-http.js';
import { findFreePort } from '../../support/redis-server.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
const fixture = useCliFixture('workers-hung');

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** A GET on a fresh connection: its status, or 'hung' past `ms` (the connection a hung worker took). */
async function probe(port: number, path: string, ms: number): Promise<number | 'hung'> {
  return rawExchange(`http://127.0.0.1:${port}`, { target: path, headers: csrf, deadlineMs: ms }).then(
    (res) => res.status,
    () => 'hung' as const,
  );
}

/** For `eventually`: true once `ms` have passed since it was made. */
const stoppedFor = (ms: number) => {
  const from = performance.now();
  return () => performance.now() - from >= ms;
};

/** Stops `pid` for the length of `body`, and lets it go on afterwards if it still lives. */
async function whileStopped<T>(pid: number, body: () => Promise<T>): Promise<T> {
  process.kill(pid, 'SIGSTOP');
  try {
    return await body();
  } finally {
    if (alive(pid)) process.kill(pid, 'SIGCONT');
  }
}

it('a worker killed while the primary sums metrics for it leaves the primary and the other worker serving', async () => {
  const metricsPort = await findFreePort();
  const { proc, port } = await startCliWorkers(fixture, { metricsPort, workerUnresponsiveSeconds: 60 });
  const [w1, w2] = workerPids(proc) as [number, number];
  await whileStopped(w2, async () => {
    // node:cluster hands the stopped worker one connection, then no more: once a probe hangs,
    // the rest go to w1.
    let absorbed = false;
    for (let i = 0; i < 3 && !absorbed; i++) absorbed = (await probe(port, '/healthz', 1000)) === 'hung';
    expect(absorbed).toBe(true);
    // w1 asks the primary for the sum, which waits for the stopped w2 until its deadline.
    const scrape = rawExchange(`http://127.0.0.1:${port}`, { target: '/metrics', deadlineMs: 15_000 }).catch((e: Error) => e);
    // w1 serves in order of accepts: once a later call is answered, the scrape has been asked.
    expect(await probe(port, '/healthz', 5000)).toBe(200);
    process.kill(w1, 'SIGKILL');
    await scrape;
    // A scrape asked later settles later (both wait for w2 until their deadline): once it has,
    // the sum w1 asked for has been answered, to a worker that is gone. (w1's replacement may
    // be missing from it too, if it was still starting.)
    expect((await rawExchange(`http://127.0.0.1:${metricsPort}`, { target: '/metrics', deadlineMs: 15_000 })).text).toMatch(/^bff_cluster_workers_unanswered [12]$/m);
    await eventually('w1 replaced', 15_000, () => workerPids(proc).length >= 3);
  });
  expect(proc.hasExited()).toBe(false);
  await eventually('calls served', 10_000, async () => (await request(port, '/up/echo', csrf)).status === 200);
  // The sum's answer was not sent to the dead worker at all (the Worker's error listener is the
  // second line of defence: it logs what the first let through).
  expect(logEvents(proc, 'worker_ipc_error')).toEqual([]);
}, 90_000);

it('a hung worker is killed after workerUnresponsiveSeconds and replaced', async () => {
  const { proc, port } = await startCliWorkers(fixture, { workerUnresponsiveSeconds: 2 });
  const [w1] = workerPids(proc) as [number];
  await whileStopped(w1, () => eventually('w1 killed as unresponsive', 15_000, () => logEvents(proc, 'worker_unresponsive').some((e) => e.pid === w1)));
  await eventually('a third worker started', 15_000, () => workerPids(proc).length >= 3);
  expect(alive(w1)).toBe(false);
  expect(logEvents(proc, 'worker_exited').map((e) => e.pid)).toEqual([w1]);
  // Every fresh connection is served again (none is handed to a hung worker).
  const statuses: Array<number | 'hung'> = [];
  for (let i = 0; i < 6; i++) statuses.push(await probe(port, '/up/echo', 5000));
  expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
}, 60_000);

it('with one worker hung, a scrape answers in time with the other worker and counts the missing one', async () => {
  const metricsPort = await findFreePort();
  const { proc, port } = await startCliWorkers(fixture, { metricsPort, workerUnresponsiveSeconds: 60 });
  const [w1, w2] = workerPids(proc) as [number, number];
  // A call on each worker first, so the sum has something of both to show.
  await eventually('both workers served a call', 10_000, async () => {
    await request(port, '/up/echo', csrf);
    return /bff_http_requests_total\{[^}]*route="\/up"[^}]*\} ([2-9]|\d\d)/.test((await request(metricsPort, '/metrics')).body);
  });
  const scrape = await whileStopped(w1, () => rawExchange(`http://127.0.0.1:${metricsPort}`, { target: '/metrics', deadlineMs: 10_000 }));
  expect(scrape.status).toBe(200);
  expect(scrape.text).toMatch(/^bff_cluster_workers_unanswered 1$/m);
  expect(scrape.text).toMatch(/bff_http_requests_total\{[^}]*route="\/up"/);
  expect(alive(w2)).toBe(true);
}, 60_000);

it('a primary that did not run for a while (its container paused) kills none of its workers on resuming', async () => {
  const metricsPort = await findFreePort();
  const { proc, port } = await startCliWorkers(fixture, { metricsPort, workerUnresponsiveSeconds: 2 });
  const workers = workerPids(proc);
  // Longer than workerUnresponsiveSeconds: the length of the pause is what is staged here.
  await whileStopped(proc.child.pid as number, () => eventually('the primary stopped for 3 s', 10_000, stoppedFor(3000)));
  // Answered by the primary: its loop has turned since, so its overdue heartbeat has run.
  for (let i = 0; i < 2; i++) expect((await rawExchange(`http://127.0.0.1:${metricsPort}`, { target: '/metrics', deadlineMs: 10_000 })).status).toBe(200);
  expect(workers.filter(alive)).toEqual(workers);
  expect(logEvents(proc, 'worker_unresponsive')).toEqual([]);
  expect((await request(port, '/up/echo', csrf)).status).toBe(200);
}, 60_000);

it('with redis.commandTimeoutMs 9000 and one worker hung, a scrape on the main port still answers with the other', async () => {
  // The primary waits commandTimeoutMs + 2 s for the workers; a worker asking for the sum waited
  // a fixed 10 s, and failed the scrape (found by review).
  const { proc, port } = await startCliWorkers(fixture, { workerUnresponsiveSeconds: 120 }, { commandTimeoutMs: 9000 });
  const [, w2] = workerPids(proc) as [number, number];
  const scrape = await whileStopped(w2, async () => {
    let absorbed = false;
    for (let i = 0; i < 3 && !absorbed; i++) absorbed = (await probe(port, '/healthz', 1000)) === 'hung';
    expect(absorbed).toBe(true);
    return rawExchange(`http://127.0.0.1:${port}`, { target: '/metrics', deadlineMs: 30_000 });
  });
  expect(scrape.status).toBe(200);
  expect(scrape.text).toMatch(/^bff_cluster_workers_unanswered 1$/m);
}, 90_000);

it('a worker that does not drain within the bound is named when it is killed', async () => {
  // Heartbeats would kill it first: this is the drain's own bound (shutdown + 15 s + 5 s).
  const { proc } = await startCliWorkers(fixture, { shutdownTimeoutSeconds: 1, workerUnresponsiveSeconds: 120 });
  const [w1] = workerPids(proc) as [number];
  await whileStopped(w1, async () => {
    proc.child.kill('SIGTERM');
    await withTimeout(proc.exited, 40_000, 'the primary exits');
  });
  expect(logEvents(proc, 'worker_killed').map((e) => e.pid)).toEqual([w1]);
}, 60_000);
