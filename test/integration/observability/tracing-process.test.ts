/**
 * Tracing in a real gateway process, started as `bff-gateway --config FILE` is: the config file
 * names no endpoint, OTEL_EXPORTER_OTLP_ENDPOINT in the environment turns tracing on (base URL
 * + /v1/traces), and SIGTERM exports the spans still waiting in the batch before the process
 * exits (the batch delay is 5 s; the process is stopped at once).
 *
 * Mutation that fails it: in src/runtime.ts close(), delete `await tracing.shutdown();` (the
 * process exits with its spans unsent: "exports the proxied call's span on SIGTERM" fails).
 */
import { request, startCliGateway, useCliFixture, withTimeout, writeConfigFile, type Spawned } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { findFreePort, redisUrlForTests } from '../../support/redis-server.js';
import { startOtlpReceiver, SPAN_KIND, type OtlpReceiver } from '../../support/otlp-receiver.js';
import { eventually } from '../../support/wait.js';

const fixture = useCliFixture('tracing');
let receiver: OtlpReceiver;
let proc: Spawned;
let upstreamTraceparent: string | undefined;
let exit: { code: number | null };

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  const port = await findFreePort();
  const file = writeConfigFile(fixture.tmp, `tracing-${port}.yaml`, {
    server: { port, host: '127.0.0.1', publicUrl: `http://127.0.0.1:${port}` },
    oidc: { issuer: fixture.provider.issuer, clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef' },
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `tracing${port}:` },
    routes: [{ path: '/up', target: fixture.upstream.url, auth: 'none' }],
    log: { level: 'info' },
  });
  proc = await startCliGateway(file, port, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.baseUrl });
  fixture.upstream.reset();
  expect((await request(port, '/up/echo', { 'x-csrf': '1' })).status).toBe(200);
  const seen = fixture.upstream.requests[0]?.headers.traceparent;
  upstreamTraceparent = Array.isArray(seen) ? seen[0] : seen;
  proc.child.kill('SIGTERM');
  exit = await withTimeout(proc.exited, 20_000, 'the gateway to exit after SIGTERM');
}, 60_000);

afterAll(async () => {
  await receiver?.close();
});

describe('OTEL_EXPORTER_OTLP_ENDPOINT', () => {
  it('turns tracing on in a gateway whose config names no endpoint, and the process exits 0 on SIGTERM', () => {
    expect(exit.code).toBe(0);
    expect(upstreamTraceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  });

  it('exports the proxied call’s span on SIGTERM, to base URL + /v1/traces', async () => {
    await eventually('the proxy span at the receiver', 5_000, () => receiver.spans.some((s) => s.name === 'proxy /up'));
    const proxy = receiver.spans.find((s) => s.name === 'proxy /up');
    expect(proxy).toMatchObject({ kind: SPAN_KIND.server, attributes: expect.objectContaining({ 'http.response.status_code': 200 }) });
    expect(upstreamTraceparent).toContain(proxy?.traceId);
    expect(receiver.requests.every((r) => r.path === '/v1/traces')).toBe(true);
  });
});
