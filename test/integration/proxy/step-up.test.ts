/**
 * Step-up (RFC 9470, SPEC §4) through the real gateway, oidc-provider and upstream: a route's
 * `stepUp` judged before the upstream is called, an upstream's insufficient_user_authentication
 * challenge mapped to the same 401 step_up_required (its own headers and body kept from the
 * browser), and a second sign-in through the answer's loginUrl that satisfies both, ending the
 * old session and keeping none of its tokens.
 *
 * Mutation that fails this file: in src/proxy/upstream.ts, change
 * `if (proxyRes.statusCode === 401 && options.stepUp) {` to `if (false) {`
 * (the upstream's challenge then reaches the browser as it is).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { digest } from '../../../src/redis/keys.js';
import { BrowserClient } from '../../support/browser-client.js';
import { rawUpgrade } from '../../support/raw-http.js';
import { signIn } from '../../support/drive-login.js';
import { expectErrorBody, expectNoSecretIn, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { createTestClock, type TestGateway } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const MFA = 'urn:bff:acr:mfa';
const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
/** Access tokens the resource server below takes for password-only sign-ins. */
const weakTokens = new Set<string>();
let challengeHeader: string | string[] = `Bearer error="insufficient_user_authentication", error_description="needs mfa", acr_values="${MFA}", max_age=600`;
let upstream: Upstream;
let stack: Stack;
let gw: TestGateway;

/** A resource server that knows (as by its own introspection) which tokens came from a weak sign-in. */
function resourceServer(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  const token = String(req.headers.authorization ?? '').replace(/^Bearer /, '');
  if (req.url?.endsWith('/plain-401')) {
    res.writeHead(401, { 'www-authenticate': 'Bearer realm="api"', 'content-type': 'text/plain' });
    res.end('plain refusal');
    return;
  }
  if (req.url?.includes('/rs/') && weakTokens.has(token)) {
    res.writeHead(401, { 'www-authenticate': challengeHeader, 'x-upstream-detail': 'rs-internal', 'set-cookie': 'rs=1; Path=/', 'content-type': 'text/plain' });
    res.end('upstream says: step up please');
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ ok: true, url: req.url }));
}

beforeAll(async () => {
  upstream = await startUpstream({ websocket: true });
  upstream.setHandler(resourceServer);
  stack = await startStack({
    clock,
    config: {
      routes: [
        { path: '/api/strong', target: upstream.url, auth: 'user', stepUp: { acr: [MFA] } },
        { path: '/api/fresh', target: upstream.url, auth: 'user', stepUp: { maxAgeSeconds: 60 } },
        { path: '/api', target: upstream.url, auth: 'user' },
        { path: '/live-pay', target: upstream.url, auth: 'user', websocket: true, stepUp: { acr: [MFA] } },
      ],
    },
  });
  gw = stack.gateway;
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

const cookieName = () => gw.config.derived.sessionCookieName;
const sessionCookie = (client: BrowserClient) => client.cookies(gw.url)[cookieName()] as string;
const get = (client: BrowserClient, path: string, headers: Record<string, string> = {}) => client.get(`${gw.url}${path}`, { headers: { ...csrf, ...headers } });

async function signedIn(loginPath = '/auth/login'): Promise<BrowserClient> {
  const client = new BrowserClient();
  await signIn(client, gw.url, { loginPath });
  return client;
}

function stepUpBody(res: { status: number; headers: Headers; text: string }): Record<string, unknown> {
  expect(res.status).toBe(401);
  expect(res.headers.get('cache-control')).toContain('no-store');
  const body = JSON.parse(res.text) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['acr_values', 'error', 'error_description', 'loginUrl', 'max_age']);
  expect(body.error).toBe('step_up_required');
  return body;
}

/** Navigates to the answer's loginUrl and signs in there (the second factor when asked); where it led. */
async function stepUp(client: BrowserClient, loginUrl: string): Promise<string> {
  const result = await signIn(client, gw.url, { loginPath: loginUrl });
  return result.final.url;
}

describe("a route's stepUp", () => {
  it('answers 401 step_up_required before calling the upstream, and a sign-in with the second factor satisfies it', async () => {
    const client = await signedIn();
    const old = sessionCookie(client);
    const before = upstream.requests.length;
    const body = stepUpBody(await get(client, '/api/strong/data'));
    expect(body).toMatchObject({ acr_values: MFA, max_age: null });
    expect(body.loginUrl).toBe(`/auth/login?acr_values=${encodeURIComponent(MFA)}&returnTo=%2F`);
    expect(upstream.requests.length).toBe(before);

    expect(await stepUp(client, body.loginUrl as string)).toBe(`${gw.url}/`);
    expect((await get(client, '/api/strong/data')).status).toBe(200);
    expect(((await get(client, '/auth/user')).json() as { acr: string }).acr).toBe(MFA);
    // The old session ended, as on any re-sign-in.
    expect(sessionCookie(client)).not.toBe(old);
    const stale = new BrowserClient();
    stale.setCookie(gw.url, cookieName(), old, { sameSite: 'strict' });
    expectErrorBody(await get(stale, '/api/strong/data'), 'login_required', 401);
  });

  it('judges max_age on the recorded auth_time: none recorded, or too old, is not enough', async () => {
    // A sign-in that did not ask about max_age has no auth_time from oidc-provider.
    const client = await signedIn();
    const body = stepUpBody(await get(client, '/api/fresh'));
    expect(body).toMatchObject({ acr_values: null, max_age: 60 });
    expect(body.loginUrl).toBe('/auth/login?max_age=60&returnTo=%2F');

    await stepUp(client, body.loginUrl as string);
    expect((await get(client, '/api/fresh')).status).toBe(200);
    clock.advance(120);
    try {
      stepUpBody(await get(client, '/api/fresh'));
    } finally {
      clock.advance(-120);
    }
    expect((await get(client, '/api/fresh')).status).toBe(200);
  });

  it("puts the calling page's path in loginUrl's returnTo when the Referer is same-origin, else /", async () => {
    const client = await signedIn();
    const same = stepUpBody(await get(client, '/api/strong', { referer: `${gw.url}/orders/7?tab=pay` }));
    // The path only: a page's query stays where it was.
    expect(new URL(same.loginUrl as string, gw.url).searchParams.get('returnTo')).toBe('/orders/7');
    const foreign = stepUpBody(await get(client, '/api/strong', { referer: 'https://evil.example/x' }));
    expect(new URL(foreign.loginUrl as string, gw.url).searchParams.get('returnTo')).toBe('/');
    const sneaky = stepUpBody(await get(client, '/api/strong', { referer: `${gw.url}//evil.example/x` }));
    expect(new URL(sneaky.loginUrl as string, gw.url).searchParams.get('returnTo')).toBe('/');
  });

  it('refuses a WebSocket upgrade the same way, before the upstream handshake', async () => {
    const client = await signedIn();
    const res = await rawUpgrade(gw.url, '/live-pay/feed', { origin: gw.config.derived.publicOrigin, cookie: `${cookieName()}=${sessionCookie(client)}` });
    expect(stepUpBody(res)).toMatchObject({ acr_values: MFA });
    expect(upstream.wsConnections).toHaveLength(0);
  });

  it('answers login_required, not step_up_required, without a session', async () => {
    expectErrorBody(await get(new BrowserClient(), '/api/strong'), 'login_required', 401);
  });
});

describe("an upstream's insufficient_user_authentication challenge", () => {
  it('becomes 401 step_up_required without the upstream headers or body, and the second sign-in satisfies it', async () => {
    const client = await signedIn();
    const old = sessionCookie(client);
    const oldTokens = await tokensOfSession(gw, old);
    weakTokens.add(oldTokens?.accessToken as string);

    const res = await get(client, '/api/rs/payments', { referer: `${gw.url}/pay` });
    const body = stepUpBody(res);
    expect(body).toMatchObject({ acr_values: MFA, max_age: 600 });
    expect(body.loginUrl).toBe(`/auth/login?acr_values=${encodeURIComponent(MFA)}&max_age=600&returnTo=%2Fpay`);
    expect(res.headers.get('www-authenticate')).toBeNull();
    expect(res.headers.get('x-upstream-detail')).toBeNull();
    expect(res.headers.get('set-cookie')).toBeNull();
    expect(res.text).not.toContain('upstream says');
    const secrets = { accessToken: oldTokens?.accessToken, refreshToken: oldTokens?.refreshToken, idToken: oldTokens?.idToken, cookie: old };
    expectNoSecretIn(`${res.text}\n${[...res.headers].join('\n')}`, secrets, 'the step_up_required answer');
    // Not taken for a refused token: no refresh was attempted.
    expect(stack.provider.counters.grants.refresh_token ?? 0).toBe(0);

    expect(await stepUp(client, body.loginUrl as string)).toBe(`${gw.url}/pay`);
    expect((await get(client, '/api/rs/payments')).status).toBe(200);
    const fresh = await tokensOfSession(gw, sessionCookie(client));
    // Nothing of the old session's tokens is kept.
    expect(fresh?.accessToken).not.toBe(oldTokens?.accessToken);
    expect(fresh?.refreshToken).toBeDefined();
    expect(fresh?.refreshToken).not.toBe(oldTokens?.refreshToken);
    expect(fresh?.idToken).not.toBe(oldTokens?.idToken);
    expect(await gw.runtime.records.peek(digestOf(old))).toBeUndefined();
    expectNoSecretIn(gw.logs.join('\n'), secrets, 'the gateway log');
  });

  it('leaves out acr_values and max_age that are malformed, rather than copying them', async () => {
    const client = await signedIn();
    weakTokens.add((await tokensOfSession(gw, sessionCookie(client)))?.accessToken as string);
    challengeHeader = 'Basic realm="x", Bearer realm="api", error="insufficient_user_authentication", acr_values="a\\"b <script>", max_age=-5';
    try {
      const body = stepUpBody(await get(client, '/api/rs/x'));
      expect(body).toMatchObject({ acr_values: null, max_age: null, loginUrl: '/auth/login?returnTo=%2F' });
    } finally {
      challengeHeader = `Bearer error="insufficient_user_authentication", acr_values="${MFA}", max_age=600`;
    }
  });

  it('finds the challenge among several WWW-Authenticate lines', async () => {
    const client = await signedIn();
    weakTokens.add((await tokensOfSession(gw, sessionCookie(client)))?.accessToken as string);
    challengeHeader = ['Basic realm="legacy"', `Bearer realm="api", error="insufficient_user_authentication", max_age=0`];
    try {
      expect(stepUpBody(await get(client, '/api/rs/y'))).toMatchObject({ acr_values: null, max_age: 0, loginUrl: '/auth/login?max_age=0&returnTo=%2F' });
    } finally {
      challengeHeader = `Bearer error="insufficient_user_authentication", acr_values="${MFA}", max_age=600`;
    }
  });

  it('passes other 401s through as they are', async () => {
    const client = await signedIn();
    const res = await get(client, '/api/plain-401');
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="api"');
    expect(res.text).toBe('plain refusal');
  });
});

const digestOf = (cookie: string) => digest(sessionIdFromCookie(cookie));
