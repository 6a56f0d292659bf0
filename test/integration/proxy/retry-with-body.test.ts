/**
 * A request is sent twice only when it has no body, whatever its method: a GET (or HEAD,
 * OPTIONS) carrying `Content-Length: N` is not retried after a 401 invalid_token. A retry goes
 * out with an empty stand-in body; with the browser's `Content-Length: N` kept, the upstream
 * read the next N bytes on that pooled keep-alive connection (the gateway's next request) as
 * the body, and what followed them as a request of its own, with the gateway's Bearer token:
 * a request smuggled past route matching, canonicalisation and scope checks. Real gateway,
 * oidc-provider and upstream; the browser side is the raw client.
 *
 * Fails if, in src/proxy/upstream-call.ts isBodyless, the body check goes back behind
 * `if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return true;` (the GET is
 * retried and the upstream serves /internal/..;/admin%2Fkeys).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { rawExchange } from '../../support/raw-http.js';
import { createTestClock } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const clock = createTestClock();
let upstream: Upstream;
let stack: Stack;
/** The upstream refuses the token of the next `refusals` requests, then answers 200 without reading the body. */
let refusals = 0;

beforeAll(async () => {
  upstream = await startUpstream();
  upstream.setHandler((req, res) => {
    req.resume();
    if (refusals > 0) {
      refusals -= 1;
      res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"', 'content-type': 'text/plain' }).end('refused');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ url: req.url }));
  });
  stack = await startStack({ clock, config: { routes: [{ path: '/api', target: upstream.url, auth: 'user' }] } });
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

beforeEach(() => upstream.reset());

async function session(): Promise<string> {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  return `${stack.config.derived.sessionCookieName}=${client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string}`;
}

it('does not retry a GET with a body after a 401 invalid_token: the 401 passes, the next request on the pooled connection is intact', async () => {
  const cookie = await session();
  const smuggled = 'GET /internal/..;/admin%2Fkeys HTTP/1.1';
  // The gateway writes the next request as `GET /api/y HTTP/1.1`, then the browser's headers in
  // order (X-Pad first): a stale Content-Length of exactly that prefix's length would make the
  // upstream read the X-Pad value as a request line.
  const prefix = 'GET /api/y HTTP/1.1\r\nx-pad: ';
  refusals = 1;
  const refreshes = stack.provider.counters.grants.refresh_token ?? 0;

  const first = await rawExchange(stack.gateway.url, {
    target: '/api/x',
    headers: [['x-csrf', '1'], ['cookie', cookie]],
    body: 'z'.repeat(prefix.length),
  });
  expect(first.status).toBe(401);
  expect(first.text).toBe('refused');
  expect((stack.provider.counters.grants.refresh_token ?? 0) - refreshes).toBe(0);

  const second = await rawExchange(stack.gateway.url, {
    target: '/api/y',
    headers: [['x-pad', smuggled], ['host', new URL(stack.gateway.url).host], ['x-csrf', '1'], ['cookie', cookie]],
  });
  expect(second.status).toBe(200);
  expect(JSON.parse(second.text)).toEqual({ url: '/api/y' });
  expect(upstream.requests.map((r) => r.url)).toEqual(['/api/x', '/api/y']);
  expect(upstream.requests[0]?.bodyBytes).toBe(prefix.length);
  expect(upstream.requests[1]?.headers['x-pad']).toBe(smuggled);
});

it('does not retry a GET with a chunked body either', async () => {
  const cookie = await session();
  refusals = 1;
  const res = await rawExchange(stack.gateway.url, {
    target: '/api/x',
    headers: [['x-csrf', '1'], ['cookie', cookie], ['transfer-encoding', 'chunked']],
    body: '5\r\nhello\r\n0\r\n\r\n',
  });
  expect(res.status).toBe(401);
  expect(upstream.requests.map((r) => r.url)).toEqual(['/api/x']);
});

// Fails if, in src/proxy/upstream.ts resend, the `delete req.headers['content-length']` line is removed.
it('still retries a GET whose Content-Length is 0, and resends it without framing headers', async () => {
  const cookie = await session();
  refusals = 1;
  const refreshes = stack.provider.counters.grants.refresh_token ?? 0;
  const res = await rawExchange(stack.gateway.url, {
    target: '/api/x',
    headers: [['x-csrf', '1'], ['cookie', cookie], ['content-length', '0']],
  });
  expect(res.status).toBe(200);
  expect((stack.provider.counters.grants.refresh_token ?? 0) - refreshes).toBe(1);
  expect(upstream.requests.map((r) => r.url)).toEqual(['/api/x', '/api/x']);
  // The resend carries no framing of a body it does not have.
  expect(upstream.requests[1]?.headers['content-length']).toBeUndefined();
  expect(upstream.requests[1]?.headers['transfer-encoding']).toBeUndefined();
});
