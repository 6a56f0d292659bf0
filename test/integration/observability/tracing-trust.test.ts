/**
 * The browser's W3C trace context, with tracing trusted, and with tracing off:
 *
 *   - trustIncoming: true: the gateway's SERVER spans (endpoint, proxied call, WebSocket
 *     upgrade) are children of the browser's traceparent, and the upstream gets the same trace
 *     with the browser's tracestate carried on;
 *   - tracing off (no endpoint): nothing is exported, log lines have no trace_id, and the
 *     browser's traceparent/tracestate reach the upstream exactly as 0.4.0 forwarded them.
 *
 * Mutation that fails it: in src/observability/tracing.ts `startServerSpan`, replace
 * `config.trustIncoming ? propagator.extract(ROOT_CONTEXT, headers, headerGetter) : ROOT_CONTEXT`
 * by `ROOT_CONTEXT` (the trusted spans become roots of new traces).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { rawUpgrade } from '../../support/raw-http.js';
import { startOtlpReceiver, SPAN_KIND, type OtlpReceiver, type ReceivedSpan } from '../../support/otlp-receiver.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
const BROWSER_TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const BROWSER_SPAN_ID = 'b7ad6b7169203331';
const BROWSER_TRACEPARENT = `00-${BROWSER_TRACE_ID}-${BROWSER_SPAN_ID}-01`;
const BROWSER_TRACESTATE = 'browser=t61rcWkgMzE';
const browserContext = { traceparent: BROWSER_TRACEPARENT, tracestate: BROWSER_TRACESTATE };

let receiver: OtlpReceiver;
let upstream: Upstream;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startUpstream({ websocket: true });
});

afterAll(async () => {
  await upstream?.close();
  await receiver?.close();
});

const routes = [
  { path: '/open', target: '', auth: 'none' as const },
  { path: '/live', target: '', auth: 'none' as const, websocket: true },
];
const startGateway = (observability?: { tracing: { endpoint: string; trustIncoming: boolean } }) =>
  startStack({ config: { routes: routes.map((r) => ({ ...r, target: upstream.url })), ...(observability ? { observability } : {}) } });

async function proxiedCall(stack: Stack) {
  upstream.reset();
  const res = await new BrowserClient().get(`${stack.gateway.url}/open/echo`, { headers: { ...csrf, ...browserContext } });
  expect(res.status).toBe(200);
  return upstream.requests[0]?.headers ?? {};
}

async function websocketHandshake(stack: Stack) {
  upstream.reset();
  const res = await rawUpgrade(stack.gateway.url, '/live/socket', { origin: stack.config.derived.publicOrigin, ...browserContext });
  expect(res.status).toBe(101);
  return upstream.wsConnections[0]?.headers ?? {};
}

describe('trustIncoming: true', () => {
  let stack: Stack;
  const seen: Record<string, Record<string, string | string[] | undefined>> = {};
  const spanNamed = (name: string) => receiver.spans.find((s) => s.name === name) as ReceivedSpan;

  beforeAll(async () => {
    receiver.reset();
    stack = await startGateway({ tracing: { endpoint: receiver.url, trustIncoming: true } });
    expect((await new BrowserClient().get(`${stack.gateway.url}/auth/login`, { headers: browserContext })).status).toBe(302);
    seen.http = await proxiedCall(stack);
    seen.ws = await websocketHandshake(stack);
    await stack.gateway.runtime.tracing.flush();
    await eventually('the spans at the receiver', 10_000, () => ['GET /auth/login', 'proxy /open', 'proxy /live'].every((n) => spanNamed(n) !== undefined));
  }, 30_000);

  afterAll(async () => {
    await stack?.close();
  });

  it.each(['GET /auth/login', 'proxy /open', 'proxy /live'])('makes %s a SERVER child of the browser’s span', (name) => {
    expect(spanNamed(name)).toMatchObject({ kind: SPAN_KIND.server, traceId: BROWSER_TRACE_ID, parentSpanId: BROWSER_SPAN_ID });
  });

  it.each([
    ['garbage', 'garbage'],
    ['an all-zero trace id', `00-${'0'.repeat(32)}-${BROWSER_SPAN_ID}-01`],
    ['version ff', `ff-${BROWSER_TRACE_ID}-${BROWSER_SPAN_ID}-01`],
    ['4 kB of trailing data', `00-${BROWSER_TRACE_ID}-${BROWSER_SPAN_ID}-01-${'x'.repeat(4000)}`],
  ])('treats a malformed traceparent (%s) as absent: the call is served in a new trace', async (_what, traceparent) => {
    upstream.reset();
    const res = await new BrowserClient().get(`${stack.gateway.url}/open/echo`, { headers: { ...csrf, traceparent, tracestate: ',,=;' } });
    expect(res.status).toBe(200);
    const forwarded = String(upstream.requests[0]?.headers.traceparent);
    expect(forwarded).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(forwarded).not.toContain(BROWSER_TRACE_ID);
    expect(upstream.requests[0]?.headers.tracestate).toBeUndefined();
  });

  it.each(['http', 'ws'])('sends the upstream (%s) the browser’s trace, under the upstream span, with its tracestate', (kind) => {
    const proxy = spanNamed(kind === 'http' ? 'proxy /open' : 'proxy /live');
    const call = receiver.spans.find((s) => s.name === 'upstream' && s.parentSpanId === proxy.spanId) as ReceivedSpan;
    expect(call.attributes['http.response.status_code']).toBe(kind === 'http' ? 200 : 101);
    expect(seen[kind]?.traceparent).toBe(`00-${BROWSER_TRACE_ID}-${call.spanId}-01`);
    expect(seen[kind]?.tracestate).toBe(BROWSER_TRACESTATE);
  });
});

describe('tracing off', () => {
  let stack: Stack;
  const seen: Record<string, Record<string, string | string[] | undefined>> = {};

  beforeAll(async () => {
    receiver.reset();
    stack = await startGateway();
    seen.http = await proxiedCall(stack);
    seen.ws = await websocketHandshake(stack);
    await stack.close();
  }, 30_000);

  it('builds nothing and exports nothing', () => {
    expect(stack.gateway.runtime.tracing.enabled).toBe(false);
    expect(receiver.requests).toEqual([]);
  });

  it('writes no trace_id into log lines', () => {
    expect(stack.gateway.logs.length).toBeGreaterThan(0);
    expect(stack.gateway.logs.filter((l) => l.includes('trace_id'))).toEqual([]);
  });

  it.each(['http', 'ws'])('leaves the browser’s traceparent and tracestate as they were (%s, as 0.4.0 did)', (kind) => {
    expect(seen[kind]).toMatchObject(browserContext);
  });
});
