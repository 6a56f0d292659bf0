/**
 * The process as operators run it and clients reach it (found by the process red team): no
 * client input ends the process, and a stop signal delivered twice (to the whole process group,
 * as systemd's default KillMode=control-group, `kill -TERM -<pgid>` and tini -g deliver it) still
 * drains. Real CLI processes (`server.workers` 1 and 2), real Redis, provider and upstream.
 *
 * Mutation checks (by hand, once), in src/main.ts:
 * - the CONNECT handler back to its one line, `socket.end('HTTP/1.1 405 …')` (no error listener,
 *   the socket left half-open): both CONNECT tests fail (the process, or every worker in turn,
 *   died of an uncaught ECONNRESET, and the in-flight calls with it). Either half of the fix
 *   alone passes them: the socket destroyed once the 405 is flushed sees no reset, and the
 *   error listener would catch a reset that came first;
 * - onStopSignal's `process.on` → `process.once`: both SIGTERM tests fail (the in-flight calls
 *   were cut by the second SIGTERM).
 */
import net from 'node:net';
import { logEvents, request, startCliGateway, useCliFixture, withTimeout, workerPids, writeConfigFile, type Spawned } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { findFreePort, redisUrlForTests } from '../../support/redis-server.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
const fixture = useCliFixture('process-edge');

async function start(workers: number): Promise<{ proc: Spawned; port: number }> {
  const port = await findFreePort();
  const file = writeConfigFile(fixture.tmp, `edge-${port}.yaml`, {
    server: { port, host: '127.0.0.1', publicUrl: `http://127.0.0.1:${port}`, workers, shutdownTimeoutSeconds: 8 },
    oidc: { issuer: fixture.provider.issuer, clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef' },
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `edge${port}:` },
    routes: [{ path: '/up', target: fixture.upstream.url, auth: 'none' }],
    log: { level: 'info' },
  });
  const proc = await startCliGateway(file, port);
  if (workers > 1) await eventually('workers started', 15_000, () => workerPids(proc).length >= workers);
  return { proc, port };
}

/** Slow calls (2.5 s at the upstream), once they have all reached it. */
async function slowCalls(port: number, count: number): Promise<Array<Promise<{ status: number }>>> {
  fixture.upstream.reset();
  const calls = Array.from({ length: count }, () => request(port, '/up/slow?ms=2500', csrf));
  await eventually('the slow calls to reach the upstream', 15_000, () => fixture.upstream.requests.length >= count || undefined);
  return calls;
}

const statusesOf = async (calls: Array<Promise<{ status: number }>>) =>
  (await Promise.allSettled(calls.map((c) => withTimeout(c, 20_000, 'in-flight call')))).map((a) =>
    a.status === 'fulfilled' ? a.value.status : `cut: ${(a.reason as Error).message}`,
  );

/** CONNECT, read the 405, then reset the connection (RST) instead of closing it. */
function connectThenReset(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => socket.write('CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n'));
    let got = '';
    socket.on('data', (chunk: Buffer) => {
      got += chunk.toString('latin1');
      if (!got.includes('\r\n\r\n')) return;
      socket.resetAndDestroy();
      resolve(got.split('\r\n')[0] as string);
    });
    socket.on('error', () => resolve(got));
    socket.setTimeout(5000, () => {
      socket.destroy();
      resolve(got);
    });
  });
}

describe('a client that resets its connection after a CONNECT', () => {
  it('is answered 405 and ends nothing else: the in-flight calls finish, the process serves on', async () => {
    const { proc, port } = await start(1);
    const calls = await slowCalls(port, 2);
    for (let i = 0; i < 5; i++) expect(await connectThenReset(port)).toBe('HTTP/1.1 405 Method Not Allowed');
    expect(await statusesOf(calls)).toEqual([200, 200]);
    expect((await request(port, '/healthz')).status).toBe(200);
    expect(proc.output()).not.toMatch(/ECONNRESET|Unhandled 'error' event/);
  }, 90_000);

  it('with workers: 2, cannot take the workers down one after another', async () => {
    const { proc, port } = await start(2);
    const calls = await slowCalls(port, 3);
    for (let i = 0; i < 10; i++) await connectThenReset(port);
    expect(await statusesOf(calls)).toEqual([200, 200, 200]);
    expect(logEvents(proc, 'worker_exited')).toEqual([]);
    expect((await request(port, '/healthz')).status).toBe(200);
  }, 90_000);
});

describe('a stop signal delivered twice', () => {
  // systemd's KillMode=control-group and `kill -<signal> -<pgid>` (SIGTERM), a terminal's Ctrl-C (SIGINT).
  it.each(['SIGTERM', 'SIGINT'] as const)('workers: 2, %s to the primary and every worker at once: the in-flight calls finish, the primary exits 0', async (signal) => {
    const { proc, port } = await start(2);
    const calls = await slowCalls(port, 3);
    process.kill(proc.child.pid as number, signal);
    for (const pid of workerPids(proc)) process.kill(pid, signal);
    expect(await statusesOf(calls)).toEqual([200, 200, 200]);
    expect((await withTimeout(proc.exited, 30_000, 'exit')).code).toBe(0);
  }, 90_000);

  it('workers: 1, a second SIGTERM during the drain is ignored (and logged): the call finishes, exit 0', async () => {
    const { proc, port } = await start(1);
    const calls = await slowCalls(port, 1);
    proc.child.kill('SIGTERM');
    await eventually('the drain to have started', 10_000, () => logEvents(proc, 'shutdown').length > 0 || undefined);
    proc.child.kill('SIGTERM');
    await eventually('the second signal to be heard', 10_000, () => logEvents(proc, 'shutdown_signal_ignored').length > 0 || undefined);
    expect(await statusesOf(calls)).toEqual([200]);
    const exit = await withTimeout(proc.exited, 30_000, 'exit');
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
  }, 90_000);
});
