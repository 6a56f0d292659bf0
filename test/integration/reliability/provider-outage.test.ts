/**
 * SPEC §3/§6/§7 with the OpenID provider down: the gateway starts anyway (discovery retries in
 * the background), /readyz names the provider, sign-in answers 503 provider_unavailable (an
 * HTML page for a browser navigation, the JSON shape otherwise), and everything works once the
 * provider is back, without a restart. Then, signed in: a provider that goes away during a
 * refresh gives 502 token_refresh_failed and the session survives it.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import {
  buildTestConfig,
  createTestClock,
  gatewayClient,
  reserveServer,
  startTestGateway,
  type TestGateway,
} from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
const READY_BOUND_MS = 10_000;
const clock = createTestClock();
let provider: TestProvider;
let upstream: Upstream;
let gw: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  const reserved = await reserveServer();
  // The provider must listen once for its issuer (and port) to be known; then it goes away.
  provider = await startTestProvider({ clients: [gatewayClient(reserved.url)], ttl: { AccessToken: 60 } });
  await provider.stop();
  const config = buildTestConfig({
    issuer: provider.issuer,
    publicUrl: reserved.url,
    routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
  });
  gw = await startTestGateway(config, reserved, { clock, waitForProvider: false });
});

afterAll(async () => {
  await gw?.close();
  await provider?.close();
  await upstream?.close();
});

describe('started while the provider is down', () => {
  it('is live (/healthz 200) but not ready: /readyz 503 names the provider only', async () => {
    const client = new BrowserClient();
    expect((await client.get(`${gw.url}/healthz`)).status).toBe(200);
    const ready = await client.get(`${gw.url}/readyz`);
    expect(ready.status).toBe(503);
    const body = ready.json<{ down?: unknown }>();
    expect(body.down).toEqual(['provider']);
  });

  it('answers a browser navigation to /auth/login with a clear 503 HTML page naming provider_unavailable', async () => {
    const res = await new BrowserClient().get(`${gw.url}/auth/login?returnTo=/orders`, {
      headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' },
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('cache-control')).toContain('no-store');
    expect(res.text).toContain('provider_unavailable');
    expect(res.text).not.toMatch(/\bat .+\.(ts|js):\d+/);
    // no half-started login: no redirect, no login cookie
    expect(res.headers.get('location')).toBeNull();
    expect(res.headers.getSetCookie().filter((c) => c.startsWith(`${gw.config.derived.loginCookieName}.`))).toEqual([]);
  });

  it('answers a JSON caller of /auth/login with 503 { error: provider_unavailable, error_description }', async () => {
    const res = await new BrowserClient().get(`${gw.url}/auth/login`, { headers: { accept: 'application/json' } });
    expectErrorBody(res, 'provider_unavailable', 503);
  });

  it('still refuses a bad returnTo with 400 before needing the provider', async () => {
    const res = await new BrowserClient().get(`${gw.url}/auth/login?returnTo=${encodeURIComponent('//evil.example')}`, {
      headers: { accept: 'application/json' },
    });
    expectErrorBody(res, 'invalid_return_to', 400);
  });

  it('answers calls that need no provider as usual (401 login_required without a session)', async () => {
    const client = new BrowserClient();
    expectErrorBody(await client.get(`${gw.url}/auth/user`, { headers: csrf }), 'login_required', 401);
    expectErrorBody(await client.get(`${gw.url}/api/echo`, { headers: csrf }), 'login_required', 401);
  });
});

describe('once the provider is back', () => {
  it('becomes ready by itself within the bound, and sign-in works', async () => {
    await provider.start();
    const started = performance.now();
    const client = new BrowserClient();
    let status = 0;
    await eventually('/readyz 200', READY_BOUND_MS, async () => (status = (await client.get(`${gw.url}/readyz`)).status) === 200, { intervalMs: 100 }).catch(() => undefined);
    console.log(`provider back: /readyz 200 after ${Math.round(performance.now() - started)} ms (discovery retry backoff 100 ms → 1 s)`);
    expect(status).toBe(200);

    const result = await signIn(client, gw.url, { returnTo: '/orders' });
    expect(new URL(result.final.url).pathname).toBe('/orders');
    expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
    expect((await client.get(`${gw.url}/api/echo`, { headers: csrf })).status).toBe(200);
  });
});

describe('the provider goes down while signed in', () => {
  let client: BrowserClient;
  let cookie: string;

  beforeAll(async () => {
    await provider.start();
    await gw.runtime.provider.ready();
    client = new BrowserClient();
    await signIn(client, gw.url);
    cookie = client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
  });

  afterAll(async () => {
    await provider.start();
  });

  it('keeps proxying with a still-valid token', async () => {
    await provider.stop();
    const res = await client.get(`${gw.url}/api/echo`, { headers: csrf });
    expect(res.status).toBe(200);
  });

  // Fails if, in src/proxy/bearer.ts userAccessToken, the catch around the renewal no longer
  // serves the token it was to renew (its `return servedOr(err);` → `throw err;`):
  // a token due for renewal but valid for 20 s more failed every call (502) while the provider
  // was down.
  it('keeps proxying with a token due for renewal but not expired, the renewal failing', async () => {
    const before = await tokensOfSession(gw, cookie);
    clock.advance(40); // 60 s tokens are renewed within 30 s of expiry
    upstream.reset();
    expect((await client.get(`${gw.url}/api/echo`, { headers: csrf })).status).toBe(200);
    expect(upstream.requests[0]?.headers.authorization).toBe(`Bearer ${before?.accessToken}`);
    expect((await client.get(`${gw.url}/api/echo`, { headers: csrf })).status).toBe(200);
  });

  it('answers 502 token_refresh_failed when a refresh is due, keeps the session and the cookie', async () => {
    const before = await tokensOfSession(gw, cookie);
    clock.advance(120);
    upstream.reset();
    const started = performance.now();
    const res = await client.get(`${gw.url}/api/echo`, { headers: csrf });
    console.log(`provider down during refresh: ${res.status} in ${Math.round(performance.now() - started)} ms`);
    expectErrorBody(res, 'token_refresh_failed', 502);
    expect(upstream.requests).toHaveLength(0);
    expect(res.headers.getSetCookie().filter((c) => c.startsWith(`${gw.config.derived.sessionCookieName}=`))).toEqual([]);
    expect(await tokensOfSession(gw, cookie)).toEqual(before);
    expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
  });

  it('refreshes on the next call once the provider is back, after the failed refresh\'s backoff', async () => {
    const before = await tokensOfSession(gw, cookie);
    await provider.start();
    // The failures doubled the backoff to 2 s: answered with the failure meanwhile.
    expectErrorBody(await client.get(`${gw.url}/api/echo`, { headers: csrf }), 'token_refresh_failed', 502);
    clock.advance(2);
    const res = await client.get(`${gw.url}/api/echo`, { headers: csrf });
    expect(res.status).toBe(200);
    const after = await tokensOfSession(gw, cookie);
    expect(after?.accessToken).not.toBe(before?.accessToken);
  });
});
