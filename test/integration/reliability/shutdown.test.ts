/**
 * The real CLI (`node dist/cli.js --config FILE`) as a process (SPEC §1, §7):
 * SIGTERM stops accepting, lets in-flight requests finish (bounded by
 * server.shutdownTimeoutSeconds), then exits 0. (`--check`: test/integration/config/cli-check.test.ts.)
 */
import net from 'node:net';
import { request, startCliGateway, useCliFixture, withTimeout, writeConfigFile, type Spawned } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { findFreePort, redisUrlForTests } from '../../support/redis-server.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };

const fixture = useCliFixture('shutdown');

const writeConfig = (name: string, doc: unknown) => writeConfigFile(fixture.tmp, name, doc);

function gatewayConfig(port: number, shutdownTimeoutSeconds: number) {
  return {
    server: { port, host: '127.0.0.1', publicUrl: `http://127.0.0.1:${port}`, shutdownTimeoutSeconds },
    oidc: { issuer: fixture.provider.issuer, clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef' },
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `shutdown${port}:` },
    routes: [{ path: '/slow', target: fixture.upstream.url, auth: 'none' }],
    log: { level: 'info' },
  };
}

/** Resolves with the connect error code (ECONNREFUSED expected) or 'connected'. */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.setTimeout(1_000, () => {
      socket.destroy();
      resolve('timeout');
    });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

async function startGatewayProcess(shutdownTimeoutSeconds: number): Promise<{ proc: Spawned; port: number }> {
  const port = await findFreePort();
  const proc = await startCliGateway(writeConfig(`gateway-${port}.yaml`, gatewayConfig(port, shutdownTimeoutSeconds)), port);
  return { proc, port };
}

async function waitForUpstreamRequest(count: number): Promise<void> {
  await eventually('the slow call reaching the upstream', 5_000, () => fixture.upstream.requests.length >= count, { intervalMs: 10 });
}

describe('SIGTERM', () => {
  it('lets an in-flight call finish with 200, refuses new connections meanwhile, and exits 0 within shutdownTimeoutSeconds', async () => {
    const shutdownTimeoutSeconds = 8;
    const { proc, port } = await startGatewayProcess(shutdownTimeoutSeconds);
    fixture.upstream.reset();
    const inflight = request(port, '/slow/slow?ms=1500', csrf);
    inflight.catch(() => undefined);
    await waitForUpstreamRequest(1);

    const sigtermAt = performance.now();
    proc.child.kill('SIGTERM');

    // New connections: refused once shutdown has begun (polled, bounded).
    let refusedAt: number | undefined;
    let lastAttempt = '';
    while (performance.now() - sigtermAt < 2_000) {
      lastAttempt = await tryConnect(port);
      if (lastAttempt === 'ECONNREFUSED') {
        refusedAt = performance.now();
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }

    const answer = await withTimeout(inflight, 10_000, 'the in-flight call');
    const exit = await withTimeout(proc.exited, (shutdownTimeoutSeconds + 5) * 1000, 'process exit');
    const ms = (t: number | undefined) => (t === undefined ? 'never' : `${Math.round(t - sigtermAt)} ms`);
    console.log(
      `SIGTERM with a 1500 ms call in flight: new connections refused after ${ms(refusedAt)} (last attempt: ${lastAttempt}), ` +
        `in-flight call answered ${answer.status} after ${ms(answer.at)}, process exited ${exit.code ?? exit.signal} after ${ms(exit.at)} ` +
        `(shutdownTimeoutSeconds ${shutdownTimeoutSeconds})`,
    );

    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ ms: 1500 });
    expect(refusedAt).toBeDefined();
    expect(refusedAt as number).toBeLessThan(answer.at);
    expect(exit.code).toBe(0);
    expect(exit.at - sigtermAt).toBeLessThanOrEqual(shutdownTimeoutSeconds * 1000 + 2_000);
    expect(proc.output()).toMatch(/"event":"shutdown"/);
  });

  it('exits 0 once shutdownTimeoutSeconds is up even when a call is still running', async () => {
    const shutdownTimeoutSeconds = 2;
    const { proc, port } = await startGatewayProcess(shutdownTimeoutSeconds);
    fixture.upstream.reset();
    const inflight = request(port, '/slow/slow?ms=20000', csrf).then(
      (a) => `answered ${a.status}`,
      (err: Error) => `cut (${err.message})`,
    );
    await waitForUpstreamRequest(1);
    const sigtermAt = performance.now();
    proc.child.kill('SIGTERM');
    const exit = await withTimeout(proc.exited, (shutdownTimeoutSeconds + 8) * 1000, 'process exit');
    const fate = await withTimeout(inflight, 5_000, 'the cut call');
    const elapsed = Math.round(exit.at - sigtermAt);
    console.log(`SIGTERM with a 20 s call in flight: exited ${exit.code ?? exit.signal} after ${elapsed} ms (shutdownTimeoutSeconds 2); the call was ${fate}`);
    expect(exit.code).toBe(0);
    expect(elapsed).toBeGreaterThanOrEqual(shutdownTimeoutSeconds * 1000 - 250);
    expect(elapsed).toBeLessThanOrEqual(shutdownTimeoutSeconds * 1000 + 3_000);
  });

  it('exits 0 promptly when idle (after answering a CONNECT with 405: it is no forward proxy)', async () => {
    const { proc, port } = await startGatewayProcess(10);
    const connectAnswer = await new Promise<string>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => socket.write('CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n'));
      let text = '';
      socket.setTimeout(3_000, () => socket.destroy());
      socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
      socket.on('close', () => resolve(text));
      socket.on('error', () => undefined);
    });
    expect(connectAnswer.startsWith('HTTP/1.1 405')).toBe(true);
    const sigtermAt = performance.now();
    proc.child.kill('SIGTERM');
    const exit = await withTimeout(proc.exited, 15_000, 'process exit');
    const elapsed = Math.round(exit.at - sigtermAt);
    console.log(`SIGTERM while idle: exited ${exit.code ?? exit.signal} after ${elapsed} ms (shutdownTimeoutSeconds 10)`);
    expect(exit.code).toBe(0);
    expect(elapsed).toBeLessThan(5_000);
  });
});
