/**
 * Hop-by-hop and identity headers (SPEC §4), through the real HTTP path: the browser's
 * connection headers describe its connection to the gateway, never the gateway's pooled
 * connections to upstreams; the upstream's describe its connection to the gateway, never the
 * browser's. Real provider, real Redis, real upstream.
 *
 * Mutation check (by hand, once): src/proxy/outgoing.ts prepareHeaders: `if (cookieKept)` →
 * `if (source.cookie !== undefined)` (as 0.5.1's first header copy had it) → "drops a Cookie
 * header the Connection names" fails: the browser's other cookies came back.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { headerValues as responseHeaderValues, rawExchange, type RawResponse } from '../../support/raw-http.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { tokensOfSession } from '../../support/assertions.js';

const csrf = { 'x-csrf': '1' };
let stack: Stack;
let upstream: Upstream;
let client: BrowserClient;
let cookie: string;

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startStack({
    config: {
      server: { stripRequestHeaders: ['X-Internal-User'] },
      routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
    },
  });
  client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  cookie = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

beforeEach(() => {
  upstream.reset();
  upstream.setHandler(undefined);
});

/** One request on its own connection (the suite's raw client), with exactly the headers given. */
function request(path: string, headers: Record<string, string>, method = 'GET', onBody?: (text: string) => void): Promise<RawResponse> {
  return rawExchange(stack.gateway.url, { method, target: path, headers, ...(onBody ? { onBody } : {}) });
}

const headerNames = (raw: readonly string[]) => raw.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
const headerValues = (raw: readonly string[], name: string) => raw.filter((_, i) => i % 2 === 1 && raw[i - 1]?.toLowerCase() === name);

describe('request headers', () => {
  it("keeps a browser's Connection: close off the pooled upstream connection: after an SSE stream answered keep-alive, later calls succeed", async () => {
    const sessionCookie = `${stack.config.derived.sessionCookieName}=${cookie}`;
    // The answer completes only once the stream ends: act on its first event meanwhile.
    let firstEvent!: () => void;
    const first = new Promise<void>((resolve) => (firstEvent = resolve));
    const sse = request('/api/sse', {
      ...csrf,
      cookie: sessionCookie,
      accept: 'text/event-stream',
      connection: 'close, Authorization, X-Forwarded-For, X-Named',
      'x-named': 'hop-only',
      'x-forwarded-for': '6.6.6.6',
      'keep-alive': 'timeout=99',
      te: 'trailers',
      'proxy-authorization': 'Basic cHJveHk6cHJveHk=',
      'proxy-connection': 'keep-alive',
    }, 'GET', (text) => text.includes('data: first') && firstEvent());
    await Promise.race([first, sse]);
    // Ends the stream from the upstream's side (the test upstream answers SSE with Connection: keep-alive).
    expect((await fetch(`${upstream.url}/sse-release`, { method: 'POST' })).status).toBe(200);
    const streamed = await sse;
    expect(streamed.status).toBe(200);
    expect(streamed.text).toContain('data: first');
    expect(streamed.text).toContain('data: last');

    // Later calls of another browser ride on the gateway's pooled connection to the upstream.
    for (let i = 0; i < 5; i++) expect((await client.get(`${stack.gateway.url}/api/echo?i=${i}`, { headers: csrf })).status).toBe(200);

    const seen = upstream.requests[0];
    expect(seen?.url).toBe('/api/sse');
    const names = headerNames(seen?.rawHeaders ?? []);
    // The only Connection the upstream saw is the gateway's own agent's.
    expect(headerValues(seen?.rawHeaders ?? [], 'connection')).toEqual(['keep-alive']);
    for (const name of ['keep-alive', 'te', 'proxy-authorization', 'proxy-connection', 'x-named']) expect([name, names.includes(name)]).toEqual([name, false]);
    // Headers the browser named are still set by the gateway itself.
    const tokens = await tokensOfSession(stack.gateway, cookie);
    expect(seen?.headers.authorization).toBe(`Bearer ${tokens?.accessToken}`);
    expect(seen?.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(upstream.requests.filter((r) => r.url.startsWith('/api/echo')).map((r) => r.headers.authorization)).toEqual(Array(5).fill(`Bearer ${tokens?.accessToken}`));
  });

  // Fails if, in src/proxy/headers.ts, `'x-original-uri',` (or any other entry) leaves IDENTITY_REQUEST_HEADERS.
  it('strips identity and rewrite headers a browser must not set, and the configured ones', async () => {
    const identity = {
      'x-original-url': '/api/admin',
      'x-rewrite-url': '/api/admin',
      'x-forwarded-uri': '/api/admin',
      'x-original-uri': '/api/admin',
      'x-forwarded-path': '/api/admin',
      'x-envoy-original-path': '/api/admin',
      'x-forwarded-scheme': 'https',
      'x-forwarded-ssl': 'on',
      'x-forwarded-server': 'evil.example',
      'x-original-host': 'evil.example',
      'x-host': 'evil.example',
      'true-client-ip': '1.2.3.4',
      'x-client-ip': '1.2.3.4',
      'cf-connecting-ip': '1.2.3.4',
      'x-cluster-client-ip': '1.2.3.4',
      'fastly-client-ip': '1.2.3.4',
      'x-http-method-override': 'DELETE',
      'x-http-method': 'DELETE',
      'x-method-override': 'DELETE',
      'x-internal-user': 'admin',
    };
    const res = await client.get(`${stack.gateway.url}/api/echo`, { headers: { ...csrf, ...identity, 'x-app': 'kept' } });
    expect(res.status).toBe(200);
    const seen = upstream.requests[0]?.headers ?? {};
    for (const name of Object.keys(identity)) expect([name, seen[name]]).toEqual([name, undefined]);
    expect(seen['x-app']).toBe('kept');
  });

  // Fails if, in proxy/outgoing.ts prepareHeaders, the skip goes back to asking
  // `name in forwarded` (the object of forwarding headers): names of Object.prototype members
  // were found there and dropped.
  it('forwards a header named like an Object.prototype member (Constructor)', async () => {
    const res = await client.get(`${stack.gateway.url}/api/echo`, { headers: { ...csrf, constructor: 'c' } });
    expect(res.status).toBe(200);
    expect(upstream.requests[0]?.headers.constructor).toBe('c');
  });
});

describe('response headers', () => {
  it('drops a Cookie header the Connection names, the other cookies too, and still signs the call in', async () => {
    const session = `${stack.config.derived.sessionCookieName}=${cookie}`;
    const named = await request('/api/echo', { ...csrf, cookie: `theirs=1; ${session}`, connection: 'keep-alive, Cookie' });
    expect(named.status).toBe(200);
    expect(upstream.requests.at(-1)?.headers.cookie).toBeUndefined();
    expect(upstream.requests.at(-1)?.headers.authorization).toMatch(/^Bearer /);
    // Without it, the browser's own cookies go on, the gateway's never.
    const plain = await request('/api/echo', { ...csrf, cookie: `theirs=1; ${session}` });
    expect(plain.status).toBe(200);
    expect(upstream.requests.at(-1)?.headers.cookie).toBe('theirs=1');
  });

  it.each(['GET', 'POST'])("drops the upstream's hop-by-hop headers and what its Connection names (%s)", async (method) => {
    upstream.setHandler((req, res) => {
      req.resume();
      req.once('end', () => {
        res.writeHead(200, {
          'content-type': 'text/plain',
          connection: 'keep-alive, X-Hop',
          'x-hop': 'upstream-only',
          'keep-alive': 'timeout=99, max=7',
          'proxy-authenticate': 'Basic realm="upstream"',
          'proxy-connection': 'keep-alive',
          trailer: 'x-checksum',
          upgrade: 'h2c',
          'x-kept': 'yes',
        });
        res.end('ok');
      });
    });
    const res = await request('/api/headers', { ...csrf, cookie: `${stack.config.derived.sessionCookieName}=${cookie}` }, method);
    expect(res.status).toBe(200);
    expect(res.text).toBe('ok');
    const names = res.rawHeaders.map(([name]) => name);
    for (const name of ['x-hop', 'proxy-authenticate', 'proxy-connection', 'trailer', 'upgrade']) expect([name, names.includes(name)]).toEqual([name, false]);
    // The gateway's server speaks for its own connection to the browser.
    expect(responseHeaderValues(res, 'keep-alive').join()).not.toContain('timeout=99');
    expect(responseHeaderValues(res, 'connection').join().toLowerCase()).not.toContain('x-hop');
    expect(responseHeaderValues(res, 'x-kept')).toEqual(['yes']);
  });
});
