/**
 * A credential per upstream (SPEC §4): client credentials shared by all processes, route
 * scopes, RFC 8707 resource tokens, API keys, the refresh-and-retry on invalid_token, and
 * WebSocket upgrades. Real provider (client_credentials and resource indicators on), real
 * Redis, real upstream servers.
 *
 * Mutation check (by hand, once): src/http/proxy-routes.ts retryFor: pass `false` as
 * forgetCookieIfSignedOut's `sentCookie` → "ends the session, cookie included, when the renewal
 * finds the grant revoked" fails (the gateway read before forwarding whether a cookie came; the
 * forwarded headers no longer carry it, which is how 0.5.0 missed it).
 */
import { decodeJwt } from 'jose';
import WebSocket from 'ws';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock, startTestGateway, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';
import { withTimeout } from '../../support/wait.js';
import type { Config } from '../../../src/config/load.js';

const csrf = { 'x-csrf': '1' };
const ORDERS_API = 'https://orders.example';
const INVENTORY = 'https://inventory.example';
const REPORTS = 'https://reports.example';
const clock = createTestClock();
let stack: Stack;
let provider: TestProvider;
let orders: Upstream;
let inventory: Upstream;
let reports: Upstream;
let legacy: Upstream;
let live: Upstream;
let config: Config;
let gw: TestGateway;
let gw2: TestGateway;

beforeAll(async () => {
  [orders, inventory, reports, legacy, live] = await Promise.all([
    startUpstream(),
    startUpstream(),
    startUpstream(),
    startUpstream(),
    startUpstream({ websocket: true }),
  ]);
  stack = await startStack({
    clock,
    client: { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] },
    provider: {
      scopes: { 'orders:read': 'Read your orders', 'inventory:read': 'Read inventory', 'reports:read': 'Read reports' },
      resourceServers: {
        [ORDERS_API]: { scope: 'orders:read' },
        [INVENTORY]: { scope: 'inventory:read' },
        [REPORTS]: { scope: 'reports:read' },
      },
      // The sign-in access token is for the main API (as Auth0's `audience` would make it).
      defaultResource: ORDERS_API,
    },
    config: {
      scopes: ['openid', 'profile', 'email', 'offline_access', 'orders:read', 'inventory:read'],
      extraAuthParams: { resource: ORDERS_API },
      routes: [
        { path: '/orders', target: orders.url, auth: 'user', scopes: ['orders:read'] },
        { path: '/admin', target: orders.url, auth: 'user', scopes: ['admin:write'] },
        { path: '/inventory', target: inventory.url, auth: 'user', resource: INVENTORY },
        { path: '/reports', target: reports.url, auth: 'client', scopes: ['reports:read'], resource: REPORTS },
        { path: '/legacy', target: legacy.url, auth: 'apiKey', apiKey: { header: 'X-API-Key', value: 'legacy-key-9f8e7d' } },
        { path: '/live', target: live.url, auth: 'user', websocket: true },
        { path: '/nows', target: live.url, auth: 'user' },
      ],
    },
  });
  ({ provider, config, gateway: gw } = stack);
  gw2 = await startTestGateway(config, undefined, { clock });
});

afterAll(async () => {
  await gw2?.close();
  await stack?.close();
  await Promise.all([orders, inventory, reports, legacy, live].map((u) => u?.close()));
});

beforeEach(() => {
  for (const u of [orders, inventory, reports, legacy, live]) {
    u.reset();
    u.setHandler(undefined);
  }
});

async function signedIn(): Promise<{ client: BrowserClient; cookie: string }> {
  const client = new BrowserClient();
  await signIn(client, gw.url);
  return { client, cookie: client.cookies(gw.url)[config.derived.sessionCookieName] as string };
}

const bearer = (u: Upstream, i = -1) => String(u.requests.at(i)?.headers.authorization ?? '').replace(/^Bearer /, '');

describe('auth: client', () => {
  it('fetches one client-credentials token for 100 concurrent calls on two processes, with the route scope and resource', async () => {
    const before = provider.counters.grants.client_credentials ?? 0;
    const anonymous = new BrowserClient();
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => anonymous.get(`${(i % 2 ? gw : gw2).url}/reports/daily`, { headers: csrf })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(100).fill(200));
    expect((provider.counters.grants.client_credentials ?? 0) - before).toBe(1);
    const tokens = new Set(reports.requests.map((r) => r.headers.authorization));
    expect(tokens.size).toBe(1);
    const claims = decodeJwt(bearer(reports));
    expect(claims.aud).toBe(REPORTS);
    expect(String(claims.scope)).toContain('reports:read');
    expect(claims.sub).toBe('bff-test'); // the gateway's own identity, not a user's
  });

  it('still needs the CSRF header', async () => {
    expectErrorBody(await new BrowserClient().get(`${gw.url}/reports/daily`), 'csrf_check_failed', 403);
    expect(reports.requests).toHaveLength(0);
  });
});

describe('route scopes', () => {
  it('passes a session holding the scope and refuses one lacking it, naming the scope', async () => {
    const { client } = await signedIn();
    expect((await client.get(`${gw.url}/orders/1`, { headers: csrf })).status).toBe(200);
    const refused = await client.get(`${gw.url}/admin/users`, { headers: csrf });
    expectErrorBody(refused, 'insufficient_scope', 403);
    expect((refused.json() as { error_description: string }).error_description).toContain('admin:write');
    expect(orders.requests).toHaveLength(1);
  });
});

describe('resource indicators (RFC 8707)', () => {
  it('sends a resource route a token whose audience is that resource, and other routes the sign-in token', async () => {
    const { client, cookie } = await signedIn();
    expect((await client.get(`${gw.url}/inventory/items`, { headers: csrf })).status).toBe(200);
    expect((await client.get(`${gw.url}/orders/1`, { headers: csrf })).status).toBe(200);
    const tokens = await tokensOfSession(gw, cookie);
    const resourceToken = bearer(inventory);
    expect(decodeJwt(resourceToken).aud).toBe(INVENTORY);
    expect(tokens?.resources?.[INVENTORY]?.accessToken).toBe(resourceToken);
    expect(bearer(orders)).toBe(tokens?.accessToken);
    expect(decodeJwt(bearer(orders)).aud).toBe(ORDERS_API);
    expect(bearer(orders)).not.toBe(resourceToken);

    // Cached per resource: a second call does not refresh again.
    const grants = provider.counters.grants.refresh_token ?? 0;
    await client.get(`${gw.url}/inventory/items`, { headers: csrf });
    expect(provider.counters.grants.refresh_token ?? 0).toBe(grants);
    expect(bearer(inventory)).toBe(resourceToken);
  });

  it('renews a resource token on its own expiry, once for concurrent calls', async () => {
    const { client } = await signedIn();
    await client.get(`${gw.url}/inventory/items`, { headers: csrf });
    const first = bearer(inventory);
    clock.advance(3600);
    const grants = provider.counters.grants.refresh_token ?? 0;
    const results = await Promise.all(Array.from({ length: 20 }, () => client.get(`${gw.url}/inventory/items`, { headers: csrf })));
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect((provider.counters.grants.refresh_token ?? 0) - grants).toBe(1);
    expect(bearer(inventory)).not.toBe(first);
    expect(decodeJwt(bearer(inventory)).aud).toBe(INVENTORY);
  });
});

describe('auth: apiKey', () => {
  it("replaces the browser's header with the configured key, which never reaches the browser", async () => {
    const res = await new BrowserClient().get(`${gw.url}/legacy/echo`, { headers: { ...csrf, 'x-api-key': 'browser-guess' } });
    expect(res.status).toBe(200);
    expect(legacy.requests.at(-1)?.rawHeaders.filter((h) => h.toLowerCase() === 'x-api-key')).toHaveLength(1);
    expect(legacy.requests.at(-1)?.headers['x-api-key']).toBe('legacy-key-9f8e7d');
    // The echo upstream reflects headers; what matters is the gateway never adds the key itself
    // to anything it answers.
    expect(gw.logs.join('\n')).not.toContain('legacy-key-9f8e7d');
  });
});

describe('an upstream 401 invalid_token', () => {
  function rejectFirstToken(u: Upstream) {
    let rejected: string | undefined;
    u.setHandler((req, res) => {
      const token = req.headers.authorization;
      req.resume();
      if (rejected === undefined || token === rejected) {
        rejected = token;
        res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"', 'content-type': 'application/json' });
        res.end('{"error":"invalid_token"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  }

  it('makes the gateway refresh once and retry once a body-less request', async () => {
    const { client } = await signedIn();
    rejectFirstToken(orders);
    const grants = provider.counters.grants.refresh_token ?? 0;
    const res = await client.get(`${gw.url}/orders/1`, { headers: csrf });
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ ok: true });
    expect((provider.counters.grants.refresh_token ?? 0) - grants).toBe(1);
    expect(orders.requests).toHaveLength(2);
    expect(orders.requests[0]?.headers.authorization).not.toBe(orders.requests[1]?.headers.authorization);
  });

  it('ends the session, cookie included, when the renewal finds the grant revoked', async () => {
    const { client, cookie } = await signedIn();
    await provider.revokeGrantsFor('alice', config.oidc.clientId);
    rejectFirstToken(orders);
    const res = await client.get(`${gw.url}/orders/1`, { headers: csrf });
    expectErrorBody(res, 'login_required', 401);
    expect(res.headers.getSetCookie().some((c) => c.startsWith(`${config.derived.sessionCookieName}=;`))).toBe(true);
    expect(orders.requests).toHaveLength(1);
    expect(await tokensOfSession(gw, cookie)).toBeUndefined();
  });

  it('retries at most once, passing a persistent 401 through', async () => {
    const { client } = await signedIn();
    orders.setHandler((req, res) => {
      req.resume();
      res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' }).end();
    });
    const res = await client.request('DELETE', `${gw.url}/orders/1`, { headers: csrf });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('invalid_token');
    expect(orders.requests).toHaveLength(2);
  });

  it('passes through without a retry for a request with a body, or for another 401', async () => {
    const { client } = await signedIn();
    rejectFirstToken(orders);
    const grants = provider.counters.grants.refresh_token ?? 0;
    const post = await client.post(`${gw.url}/orders`, { headers: csrf, json: { item: 1 } });
    expect(post.status).toBe(401);
    expect(orders.requests).toHaveLength(1);
    orders.reset();
    orders.setHandler((req, res) => {
      req.resume();
      res.writeHead(401, { 'www-authenticate': 'Bearer realm="orders"' }).end();
    });
    expect((await client.get(`${gw.url}/orders/1`, { headers: csrf })).status).toBe(401);
    expect(orders.requests).toHaveLength(1);
    expect(provider.counters.grants.refresh_token ?? 0).toBe(grants);
  });
});

describe('WebSockets', () => {
  function connect(path: string, headers: Record<string, string>): Promise<{ ws: WebSocket; status: number }> {
    return new Promise((resolve) => {
      const ws = new WebSocket(`${gw.url.replace('http', 'ws')}${path}`, { headers });
      ws.once('open', () => resolve({ ws, status: 101 }));
      ws.once('unexpected-response', (_req, res) => resolve({ ws, status: res.statusCode ?? 0 }));
      ws.once('error', () => resolve({ ws, status: 0 }));
    });
  }

  it('proxies an upgrade with the session cookie and Origin, carrying the Bearer token upstream', async () => {
    const { cookie } = await signedIn();
    const { ws, status } = await connect('/live/socket', {
      origin: config.derived.publicOrigin,
      cookie: `${config.derived.sessionCookieName}=${cookie}`,
    });
    expect(status).toBe(101);
    const echoed = new Promise<string>((resolve) => ws.once('message', (d) => resolve(String(d))));
    ws.send('hello');
    expect(await echoed).toBe('hello');
    const tokens = await tokensOfSession(gw, cookie);
    expect(live.wsConnections.at(-1)?.headers.authorization).toBe(`Bearer ${tokens?.accessToken}`);
    expect(String(live.wsConnections.at(-1)?.headers.cookie ?? '')).not.toContain(cookie);
    ws.close();
  });

  it('refuses a cross-origin upgrade, one without a session, and upgrades on other routes', async () => {
    const { cookie } = await signedIn();
    const sessionCookie = `${config.derived.sessionCookieName}=${cookie}`;
    expect((await connect('/live/socket', { origin: 'https://evil.example', cookie: sessionCookie })).status).toBe(403);
    expect((await connect('/live/socket', { origin: config.derived.publicOrigin })).status).toBe(401);
    expect((await connect('/nows/socket', { origin: config.derived.publicOrigin, cookie: sessionCookie })).status).toBe(404);
    expect((await connect('/elsewhere', { origin: config.derived.publicOrigin, cookie: sessionCookie })).status).toBe(404);
    expect(live.wsConnections).toHaveLength(0);
  });

  it('closes the socket within a few seconds after its session ends', async () => {
    const { client, cookie } = await signedIn();
    const { ws, status } = await connect('/live/socket', {
      origin: config.derived.publicOrigin,
      cookie: `${config.derived.sessionCookieName}=${cookie}`,
    });
    expect(status).toBe(101);
    const closed = new Promise<number>((resolve) => ws.once('close', () => resolve(Date.now())));
    const loggedOut = Date.now();
    await client.post(`${gw.url}/auth/logout`, { headers: csrf });
    const closedAt = await withTimeout(closed, 8000, 'the socket closing', { fallback: -1 });
    expect(closedAt).toBeGreaterThan(0);
    console.log(`WebSocket closed ${closedAt - loggedOut} ms after logout`);
  });
});
