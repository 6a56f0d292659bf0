/**
 * Promises about what a proxied call carries (SPEC §4), each through the real path: the
 * browser's own Authorization never reaches an upstream, whatever the route's auth mode;
 * upstream Set-Cookie headers cannot overwrite the gateway's cookies; `requireSession`;
 * a custom `csrf.headerName`.
 *
 * Mutation checks (each by hand, once):
 *  - src/proxy/headers.ts SET_BY_GATEWAY: drop `'authorization'` from the names the header
 *    copy skips → the first two fail.
 *  - src/proxy/headers.ts responseHeaders: delete the line skipping our Set-Cookie names → the
 *    Set-Cookie test fails.
 *  - src/http/proxy-routes.ts attachCredential: delete the `route.requireSession` check →
 *    the requireSession test fails.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';

const CSRF_HEADER = 'x-requested-by';
const csrf = { [CSRF_HEADER]: '1' };
const BROWSER_AUTH = 'Bearer browser-written-token';
let upstream: Upstream;
let stack: Stack;
let url: string;

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startStack({
    client: { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] },
    config: {
      csrf: { headerName: CSRF_HEADER },
      routes: [
        { path: '/user', target: upstream.url, auth: 'user' },
        { path: '/optional', target: upstream.url, auth: 'user-optional' },
        { path: '/open', target: upstream.url, auth: 'none' },
        { path: '/client', target: upstream.url, auth: 'client' },
        { path: '/members', target: upstream.url, auth: 'client', requireSession: true },
        { path: '/legacy', target: upstream.url, auth: 'apiKey', apiKey: { header: 'X-Api-Key', value: 'legacy-key-0123456789' } },
      ],
    },
  });
  url = stack.gateway.url;
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

/** What the upstream received for one call, or undefined when it was not called. */
async function received(client: BrowserClient, path: string, headers: Record<string, string> = {}) {
  upstream.reset();
  const res = await client.get(`${url}${path}`, { headers: { ...csrf, authorization: BROWSER_AUTH, ...headers } });
  return { res, seen: upstream.requests[0]?.headers };
}

describe("the browser's Authorization header", () => {
  it('never reaches the upstream on none, user-optional, client or apiKey routes, signed out', async () => {
    const anonymous = new BrowserClient();
    for (const path of ['/open/echo', '/optional/echo']) {
      const { res, seen } = await received(anonymous, path);
      expect(res.status).toBe(200);
      expect(seen?.authorization).toBeUndefined();
    }
    const client = await received(anonymous, '/client/echo');
    expect(client.res.status).toBe(200);
    expect(client.seen?.authorization).toMatch(/^Bearer /);
    expect(client.seen?.authorization).not.toBe(BROWSER_AUTH);
    const legacy = await received(anonymous, '/legacy/echo', { 'x-api-key': 'browser-key' });
    expect(legacy.res.status).toBe(200);
    expect(legacy.seen?.authorization).toBeUndefined();
    expect(legacy.seen?.['x-api-key']).toBe('legacy-key-0123456789');
  });

  it('is replaced by the session token on user and user-optional routes, signed in', async () => {
    const browser = new BrowserClient();
    await signIn(browser, url);
    const tokens = await tokensOfSession(stack.gateway, browser.cookies(url)[stack.config.derived.sessionCookieName] as string);
    for (const path of ['/user/echo', '/optional/echo']) {
      const { res, seen } = await received(browser, path);
      expect(res.status).toBe(200);
      expect(seen?.authorization).toBe(`Bearer ${tokens?.accessToken}`);
    }
    const open = await received(browser, '/open/echo');
    expect(open.seen?.authorization).toBeUndefined();
  });
});

describe("upstream Set-Cookie against the gateway's cookies", () => {
  it("drops a Set-Cookie naming the session or a login cookie, on body-less and bodied calls, and passes the upstream's own", async () => {
    const browser = new BrowserClient();
    await signIn(browser, url);
    const { sessionCookieName, loginCookieName } = stack.config.derived;
    const before = browser.cookies(url)[sessionCookieName];
    const cookies = [`${sessionCookieName}=planted; Path=/`, `${loginCookieName}.abcdef012345=planted; Path=/`, 'upstream_own=1; Path=/'];
    upstream.setHandler((req, res) => {
      req.resume();
      res.writeHead(200, [['content-type', 'text/plain'], ...cookies.map((c) => ['set-cookie', c] as [string, string])].flat());
      res.end('ok');
    });
    try {
      // GET goes through the checked (retriable) proxy, POST through the streaming one.
      for (const method of ['GET', 'POST'] as const) {
        const res = await browser.request(method, `${url}/user/anything`, { headers: csrf });
        expect(res.status).toBe(200);
        expect(res.headers.getSetCookie()).toEqual([expect.stringMatching(/^upstream_own=1/)]);
      }
    } finally {
      upstream.setHandler(undefined);
    }
    expect(browser.cookies(url)[sessionCookieName]).toBe(before);
    expect((await browser.get(`${url}/auth/user`, { headers: csrf })).status).toBe(200);
  });
});

describe('requireSession on a client route', () => {
  it('answers 401 login_required without a session and never calls the upstream; with one, sends the client token', async () => {
    const { res, seen } = await received(new BrowserClient(), '/members/echo');
    expectErrorBody(res, 'login_required', 401);
    expect(seen).toBeUndefined();
    const browser = new BrowserClient();
    await signIn(browser, url);
    const signedIn = await received(browser, '/members/echo');
    expect(signedIn.res.status).toBe(200);
    expect(signedIn.seen?.authorization).toMatch(/^Bearer /);
  });

  // Fails if, in src/proxy/upstream.ts, forCookie is `route.auth === 'user' || route.auth ===
  // 'user-optional'` again: a CDN in front of the gateway kept a members-only answer for anyone.
  it("marks the answer private and varying on the cookie, as a user route's (only a session gets it)", async () => {
    upstream.setHandler((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=300', vary: 'Authorization' });
      res.end('{}');
    });
    try {
      const browser = new BrowserClient();
      await signIn(browser, url);
      const members = (await received(browser, '/members/x')).res;
      // (Every proxied answer varies on the configured CSRF header too: test/e2e/cached-navigation.)
      expect([members.headers.get('cache-control'), members.headers.get('vary')]).toEqual(['max-age=300, private', `Cookie, ${CSRF_HEADER}`]);
      const client = (await received(browser, '/client/x')).res;
      expect([client.headers.get('cache-control'), client.headers.get('vary')]).toEqual(['max-age=300', `Authorization, ${CSRF_HEADER}`]);
    } finally {
      upstream.setHandler(undefined);
    }
  });
});

describe('a custom csrf.headerName', () => {
  it('is the header required on proxied calls and JSON endpoints; x-csrf alone is refused', async () => {
    const browser = new BrowserClient();
    await signIn(browser, url);
    upstream.reset();
    expectErrorBody(await browser.get(`${url}/open/echo`, { headers: { 'x-csrf': '1' } }), 'csrf_check_failed', 403);
    expectErrorBody(await browser.get(`${url}/auth/user`, { headers: { 'x-csrf': '1' } }), 'csrf_check_failed', 403);
    expect(upstream.requests).toHaveLength(0);
    expect((await browser.get(`${url}/open/echo`, { headers: csrf })).status).toBe(200);
    expect((await browser.get(`${url}/auth/user`, { headers: csrf })).status).toBe(200);
  });
});
