/**
 * How many header fields a request may carry (http/header-fields.ts, http/server-options.ts).
 *
 * Node before 22.23.2 and 24.18.1 (which `engines` admits) left the fields past its
 * maxHeadersCount out of req.headers while its parser still framed the body by them: 1,000
 * fields, then a Content-Length, reached the gateway as a GET without a body, whose body bytes
 * went on to the upstream as a request of the browser's making, on a pooled connection, past
 * every route and check (found by red team, shown on Node 20). The suite's Node refuses such a
 * head itself, with a bare 431; the gateway now reads every field and refuses past 100, on any
 * Node, in its own error shape, and never forwards more to an upstream that may truncate.
 *
 * Fails if, in src/http/server-options.ts createGatewayServer, `server.maxHeadersCount = 0;` is
 * removed (the smuggling shape gets Node's bare 431, not the gateway's), or if
 * src/http/header-fields.ts tooManyHeaderFields returns `undefined` (all three fail).
 */
import { expectErrorBody } from '../../support/assertions.js';
import { rawExchange, rawUpgrade } from '../../support/raw-http.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

let upstream: Upstream;
let stack: Stack;

beforeAll(async () => {
  upstream = await startUpstream({ websocket: true });
  stack = await startStack({
    config: {
      routes: [
        { path: '/public', target: upstream.url, auth: 'none' },
        { path: '/live', target: upstream.url, auth: 'none', websocket: true },
      ],
    },
  });
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

beforeEach(() => upstream.reset());

/** `count` header fields in all, the CSRF header among them. */
const fields = (count: number): Array<[string, string]> => [['x-csrf', '1'], ...Array.from({ length: count - 1 }, (_, i): [string, string] => [`x-f${i}`, 'v'])];

it('serves 100 header fields, and refuses 101 with 431 too_many_header_fields before the upstream', async () => {
  // rawExchange adds Host and Connection: two of the hundred.
  const served = await rawExchange(stack.gateway.url, { target: '/public/echo', headers: fields(98) });
  expect(served.status).toBe(200);
  expect(upstream.requests).toHaveLength(1);
  expectErrorBody(await rawExchange(stack.gateway.url, { target: '/public/echo', headers: fields(99) }), 'too_many_header_fields', 431);
  expect(upstream.requests).toHaveLength(1);
});

it('refuses a Content-Length after a thousand fields in its own error shape, and the upstream sees nothing', async () => {
  const smuggled = 'GET /internal/admin HTTP/1.1\r\nHost: upstream\r\nX-Smuggled: 1\r\n\r\n';
  const res = await rawExchange(stack.gateway.url, {
    target: '/public/echo',
    headers: [...fields(1000), ['content-length', String(smuggled.length)]],
    body: smuggled,
  });
  expectErrorBody(res, 'too_many_header_fields', 431);
  expect(upstream.requests).toHaveLength(0);
});

it('refuses a WebSocket upgrade with 101 header fields', async () => {
  // rawUpgrade adds Host and the four handshake fields; with Origin, 101 in all.
  const headers = Object.fromEntries(fields(95));
  const res = await rawUpgrade(stack.gateway.url, '/live/socket', { ...headers, origin: stack.gateway.config.derived.publicOrigin });
  expectErrorBody(res, 'too_many_header_fields', 431);
  expect(upstream.wsConnections).toHaveLength(0);
});
