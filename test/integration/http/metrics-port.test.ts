/**
 * `server.metricsPort` (SPEC §3): /metrics is served there and only there, by the server that
 * main.ts starts. 0.3.0 handed a bare Node response to an Express handler on that port: the
 * first scrape threw, the rejection was discarded with `void`, and the process exited 1.
 *
 * Mutation check: in src/main.ts, serve the metrics port with
 * `http.createServer((req, res) => void createMetricsHandler(runtime.metrics)(req as never, res as never, () => undefined))`
 * (the 0.3.0 line): the CLI process exits on its first scrape and every test here fails.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Gauge } from 'prom-client';
import { startGateway, type RunningGateway } from '../../../src/main.js';
import { createRuntime } from '../../../src/runtime.js';
import { ensureBuilt, killAllCli, request, startCliGateway, writeConfigFile } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { buildTestConfig, gatewayClient } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { findFreePort, redisUrlForTests } from '../../support/redis-server.js';

let tmp: string;
let provider: TestProvider;

beforeAll(async () => {
  ensureBuilt();
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-metrics-port-'));
  provider = await startTestProvider({ clients: [gatewayClient('http://127.0.0.1:1')] });
}, 200_000);

afterAll(async () => {
  killAllCli();
  await provider?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const portOf = (url: string) => Number(new URL(url).port);

describe('server.metricsPort, on the gateway process the CLI starts', () => {
  it('answers several scrapes there, stays up, and the main port answers 404 for /metrics', async () => {
    const [port, metricsPort] = [await findFreePort(), await findFreePort()];
    const file = writeConfigFile(tmp, `metrics-${port}.yaml`, {
      server: { port, host: '127.0.0.1', publicUrl: `http://127.0.0.1:${port}`, metricsPort },
      oidc: { issuer: provider.issuer, clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef' },
      session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
      redis: { url: redisUrlForTests(), keyPrefix: `metrics${port}:` },
      log: { level: 'info' },
    });
    const proc = await startCliGateway(file, port);

    for (let i = 0; i < 3; i++) {
      const scrape = await request(metricsPort, '/metrics');
      expect(scrape.status).toBe(200);
      expect(scrape.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(scrape.body).toMatch(/^# HELP bff_http_requests_total /m);
      expect(scrape.body).toMatch(/^bff_nodejs_eventloop_lag_seconds /m);
    }
    const elsewhere = await request(metricsPort, '/healthz');
    expect(elsewhere.status).toBe(404);
    expect(JSON.parse(elsewhere.body)).toMatchObject({ error: 'not_found' });

    const onMain = await request(port, '/metrics');
    expect(onMain.status).toBe(404);
    expect(JSON.parse(onMain.body)).toMatchObject({ error: 'not_found' });
    expect((await request(port, '/healthz')).status).toBe(200);
    expect(proc.hasExited()).toBe(false);

    proc.child.kill('SIGTERM');
    expect((await proc.exited).code).toBe(0);
  }, 60_000);
});

describe('a handler that throws', () => {
  let gateway: RunningGateway;
  const logs: string[] = [];

  beforeAll(async () => {
    const config = buildTestConfig({ issuer: provider.issuer, publicUrl: 'http://127.0.0.1:1', server: { metricsPort: 0 } });
    const runtime = await createRuntime(config, { logDestination: { write: (l: string) => void logs.push(l) }, defaultMetrics: false });
    gateway = await startGateway(config, runtime);
  });
  afterAll(async () => {
    await gateway?.shutdown();
  });

  it('answers 500 server_error (no stack) on the metrics port, logs the bug, and the gateway keeps serving', async () => {
    // A collector that throws at scrape time: the registry's own extension point, as a
    // misbehaving metric would.
    new Gauge({
      name: 'test_broken_metric',
      help: 'throws when collected',
      registers: [gateway.runtime.metrics.registry],
      collect() {
        throw new Error('collector exploded');
      },
    });
    const metricsPort = portOf(gateway.metricsUrl as string);
    const failed = await request(metricsPort, '/metrics');
    expect(failed.status).toBe(500);
    expect(failed.headers['cache-control']).toBe('no-store');
    expect(JSON.parse(failed.body)).toEqual({ error: 'server_error', error_description: expect.any(String) });
    expect(failed.body).not.toMatch(/collector exploded|at .*\.ts/);
    expect(logs.some((l) => l.includes('"level":50') && l.includes('collector exploded'))).toBe(true);

    // Still up, on both ports.
    expect((await request(portOf(gateway.url), '/healthz')).status).toBe(200);
    gateway.runtime.metrics.registry.removeSingleMetric('test_broken_metric');
    const again = await request(metricsPort, '/metrics');
    expect(again.status).toBe(200);
    expect(again.body).toMatch(/^# HELP bff_http_requests_total /m);
  });
});
