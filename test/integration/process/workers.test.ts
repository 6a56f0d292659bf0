/**
 * `server.workers: 2` (SPEC §2, §7a; issue 17): the CLI starts a supervising primary and two
 * worker processes on one port. /metrics reports the sum over the workers (on the metrics port,
 * served by the primary, and on the main port, where a worker asks the primary); a killed
 * worker is replaced while the other goes on serving; SIGTERM drains every worker (an in-flight
 * call finishes) and the primary exits 0.
 *
 * Mutation checks (by hand, once): in src/main.ts, skip `primary.share(...)` → the metrics
 * tests fail (the sum lacks the workers' counts); in src/supervisor.ts, do not `fork()` again
 * after an exit → the replacement test fails.
 */
import { logEvents, request, startCliWorkers, useCliFixture, withTimeout, workerPids } from '../../support/cli-process.js';
import { eventually } from '../../support/wait.js';
import { findFreePort } from '../../support/redis-server.js';

const csrf = { 'x-csrf': '1' };
const fixture = useCliFixture('workers');

/** `count` calls, each on a fresh connection, so the cluster spreads them over the workers. */
async function calls(port: number, count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) statuses.push((await request(port, '/up/echo', csrf)).status);
  return statuses;
}

const proxied = (metrics: string) => Number(/^bff_http_requests_total\{route="\/up",method="GET",status="200"\} (\d+)$/m.exec(metrics)?.[1] ?? 0);

describe('server.workers: 2', () => {
  it('reports the sum over both workers on the metrics port (served by the primary); the main port has no /metrics', async () => {
    const metricsPort = await findFreePort();
    const { proc, port } = await startCliWorkers(fixture, { metricsPort });
    expect(new Set(workerPids(proc)).size).toBe(2);
    expect(await calls(port, 20)).toEqual(Array(20).fill(200));
    const scrape = await request(metricsPort, '/metrics');
    expect(scrape.status).toBe(200);
    expect(proxied(scrape.body)).toBe(20);
    expect((await request(port, '/metrics')).status).toBe(404);
    proc.child.kill('SIGTERM');
    expect((await withTimeout(proc.exited, 20_000, 'exit')).code).toBe(0);
  }, 60_000);

  it('reports the same sum on the main port when there is no metrics port (a worker asks the primary)', async () => {
    const { proc, port } = await startCliWorkers(fixture);
    expect(await calls(port, 12)).toEqual(Array(12).fill(200));
    // Every scrape lands on one worker or the other; each answers with the sum.
    for (let i = 0; i < 4; i++) expect(proxied((await request(port, '/metrics')).body)).toBe(12);
    proc.child.kill('SIGTERM');
    expect((await withTimeout(proc.exited, 20_000, 'exit')).code).toBe(0);
  }, 60_000);

  it('replaces a killed worker, says so, and keeps serving meanwhile', async () => {
    const { proc, port } = await startCliWorkers(fixture);
    const [victim] = workerPids(proc);
    process.kill(victim as number, 'SIGKILL');
    await eventually('the exit to be logged', 15_000, () => logEvents(proc, 'worker_exited').some((e) => e.pid === victim));
    // The other worker serves while the replacement starts.
    expect(await calls(port, 10)).toEqual(Array(10).fill(200));
    await eventually('a replacement worker', 15_000, () => workerPids(proc).length >= 3);
    const exited = logEvents(proc, 'worker_exited')[0];
    expect(exited).toMatchObject({ pid: victim, signal: 'SIGKILL', restartInMs: expect.any(Number) });
    expect(await calls(port, 10)).toEqual(Array(10).fill(200));
    proc.child.kill('SIGTERM');
    expect((await withTimeout(proc.exited, 20_000, 'exit')).code).toBe(0);
  }, 60_000);

  it('drains every worker on SIGTERM: an in-flight call finishes, then the primary exits 0', async () => {
    const { proc, port } = await startCliWorkers(fixture);
    fixture.upstream.reset();
    const inflight = request(port, '/up/slow?ms=1500', csrf);
    await eventually('the slow call to reach the upstream', 15_000, () => fixture.upstream.requests.length >= 1);
    proc.child.kill('SIGTERM');
    const answer = await withTimeout(inflight, 15_000, 'the in-flight call');
    expect(answer.status).toBe(200);
    const exit = await withTimeout(proc.exited, 20_000, 'exit');
    expect(exit.code).toBe(0);
    // No worker outlives the primary.
    for (const pid of workerPids(proc)) expect(() => process.kill(pid, 0)).toThrow();
  }, 60_000);
});
