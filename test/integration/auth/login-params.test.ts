/**
 * GET /auth/login's login parameters (SPEC §3, OIDC Core §3.1.2.1) through the real gateway and
 * oidc-provider: the allow-listed ones reach the provider as validated, anything else is 400
 * invalid_request and reaches nobody; the callback checks `auth_time` against max_age and `acr`
 * against acr_values (Core §3.1.3.7 steps 12–13), and the session records both.
 *
 * Mutation that fails this file: in src/oidc/authentication-checks.ts, change
 * `if (authTime + asked.maxAge + toleranceSeconds < nowSeconds)` to `if (false)`
 * ("refuses an auth_time older than max_age" then finds a session).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { authorizeAtProvider, completeAtProvider, signIn } from '../../support/drive-login.js';
import { expectErrorBody } from '../../support/assertions.js';
import { createTestClock, gatewayClient, reserveServer, startTestGateway, buildTestConfig, type TestGateway } from '../../support/gateway.js';
import { startProviderFront, startFrontedProvider, type ProviderFront } from '../../support/provider-front.js';
import { startStack, type Stack } from '../../support/stack.js';
import type { TestProvider } from '../../support/oidc-provider.js';

const MFA = 'urn:bff:acr:mfa';
const PWD = 'urn:bff:acr:pwd';
const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
let stack: Stack;
let gw: TestGateway;

beforeAll(async () => {
  stack = await startStack({ clock });
  gw = stack.gateway;
});

afterAll(() => stack?.close());

const loginCookies = (client: BrowserClient) => Object.keys(client.cookies(gw.url)).filter((n) => n.startsWith(gw.config.derived.loginCookieName));
const user = async (client: BrowserClient) => (await client.get(`${gw.url}/auth/user`, { headers: csrf })).json() as Record<string, unknown>;

describe('login parameters', () => {
  it('passes the allow-listed parameters to the provider, as validated', async () => {
    const client = new BrowserClient();
    const query = new URLSearchParams({ prompt: 'login consent', login_hint: 'alice@example.com', ui_locales: 'en-GB de', max_age: '300', acr_values: PWD, returnTo: '/x' });
    const res = await client.get(`${gw.url}/auth/login?${query}`);
    expect(res.status).toBe(302);
    const url = new URL(res.redirectUrl as string);
    expect(url.searchParams.get('prompt')).toBe('login consent');
    expect(url.searchParams.get('login_hint')).toBe('alice@example.com');
    expect(url.searchParams.get('ui_locales')).toBe('en-GB de');
    expect(url.searchParams.get('max_age')).toBe('300');
    // Essential (OIDC Core §5.5.1.1), as the provider advertises the claims parameter; not also
    // as acr_values, which oidc-provider would let replace it with a voluntary request.
    expect(JSON.parse(url.searchParams.get('claims') as string)).toEqual({ id_token: { acr: { essential: true, values: [PWD] } } });
    expect(url.searchParams.get('acr_values')).toBeNull();
  });

  it.each([
    ['an unknown parameter', 'scope=admin'],
    ['a parameter the gateway sets itself', 'redirect_uri=https://evil.example/cb'],
    ['a repeated parameter', 'prompt=login&prompt=consent'],
    ['an unknown prompt', 'prompt=everything'],
    ['prompt=none with another value', 'prompt=none%20login'],
    ['a negative max_age', 'max_age=-1'],
    ['a fractional max_age', 'max_age=1.5'],
    ['a huge max_age', 'max_age=999999999'],
    ['acr_values with a quote', 'acr_values=%22urn%3Ax'],
    ['acr_values with a double space', 'acr_values=a%20%20b'],
    ['too many acr_values', `acr_values=${encodeURIComponent('a b c d e f g h i')}`],
    ['a login_hint with a control character', 'login_hint=al%0Aice'],
    ['a login_hint too long', `login_hint=${'a'.repeat(257)}`],
    ['ui_locales that are not language tags', 'ui_locales=en_GB'],
    ['prompt=create the provider does not offer', 'prompt=create'],
  ])('answers 400 invalid_request to %s, with no login started', async (_what, query) => {
    const client = new BrowserClient();
    const res = await client.get(`${gw.url}/auth/login?${query}`);
    expectErrorBody(res, 'invalid_request', 400);
    expect(res.headers.get('location')).toBeNull();
    expect(loginCookies(client)).toEqual([]);
  });

  it('records acr and auth_time when the ID token has them, and /auth/user shows them (null when it has not)', async () => {
    const plain = new BrowserClient();
    await signIn(plain, gw.url);
    // oidc-provider sends acr and auth_time only when the request asks about them.
    expect(await user(plain)).toMatchObject({ acr: null, authTime: null });

    const client = new BrowserClient();
    await signIn(client, gw.url, { loginPath: `/auth/login?max_age=600&acr_values=${encodeURIComponent(PWD)}` });
    const body = await user(client);
    expect(body.acr).toBe(PWD);
    expect(typeof body.authTime).toBe('string');
    expect(Math.abs(Date.parse(body.authTime as string) - Date.now())).toBeLessThan(5 * 60_000);
  });

  it('honours max_age: the provider signs the user in again and the fresh auth_time passes', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url, { loginPath: '/auth/login?max_age=600' });
    const first = await user(client);
    const res = await client.get(`${gw.url}/auth/login?max_age=0&returnTo=/fresh`);
    const run = await authorizeAtProvider(client, res.redirectUrl as string);
    // Its session is seconds old, yet max_age=0 brings the password form back.
    expect(run.hops.some((h) => h.response?.text.includes('type="password"'))).toBe(true);
    const back = await client.get(run.callbackUrl, { crossSite: true });
    expect(back.headers.get('location')).toBe(`${gw.url}/fresh`);
    const second = await user(client);
    expect(Date.parse(second.authTime as string)).toBeGreaterThanOrEqual(Date.parse(first.authTime as string));
  });

  it('refuses an auth_time older than max_age (as the gateway clock reads it): no session', async () => {
    const client = new BrowserClient();
    const res = await client.get(`${gw.url}/auth/login?max_age=60`);
    const callback = await completeAtProvider(client, res.redirectUrl as string);
    // The provider signed in "now"; by the time the gateway sees it, 60 s + tolerance are gone.
    clock.advance(60 + gw.config.oidc.clockToleranceSeconds + 10);
    try {
      const back = await client.get(callback, { crossSite: true, headers: { accept: 'application/json' } });
      expectErrorBody(back, 'invalid_request', 400);
      expect(client.cookies(gw.url)[gw.config.derived.sessionCookieName]).toBeUndefined();
      // Operators read why, by a fixed code (no claim values).
      expect(gw.logs.some((l) => l.includes('"event":"login_failed"') && l.includes('"reason":"auth_time_too_old"'))).toBe(true);
    } finally {
      clock.advance(-(60 + gw.config.oidc.clockToleranceSeconds + 10));
    }
  });

  it('prompt=none without a provider session comes back to returnTo with error=login_required, no session', async () => {
    const client = new BrowserClient();
    const res = await client.get(`${gw.url}/auth/login?prompt=none&returnTo=/quiet`);
    expect(new URL(res.redirectUrl as string).searchParams.get('prompt')).toBe('none');
    const run = await authorizeAtProvider(client, res.redirectUrl as string);
    const back = await client.get(run.callbackUrl, { crossSite: true });
    expect(back.headers.get('location')).toBe(`${gw.url}/quiet?error=login_required`);
    expect(client.cookies(gw.url)[gw.config.derived.sessionCookieName]).toBeUndefined();
  });

  it('asks for the second factor when acr_values names it, and records the stronger acr', async () => {
    const client = new BrowserClient();
    const result = await signIn(client, `${gw.url}`, { loginPath: `/auth/login?acr_values=${encodeURIComponent(MFA)}` as string });
    expect(result.hops.some((h) => h.response?.text.includes('id="otp-code"'))).toBe(true);
    expect((await user(client)).acr).toBe(MFA);
  });
});

describe('a provider that ignores the requested acr', () => {
  let front: ProviderFront;
  let provider: TestProvider;
  let gateway: TestGateway;

  beforeAll(async () => {
    front = await startProviderFront();
    const reserved = await reserveServer();
    provider = await startFrontedProvider(front, { clients: [gatewayClient(reserved.url)] });
    gateway = await startTestGateway(buildTestConfig({ issuer: front.url, publicUrl: reserved.url }), reserved);
    // A provider that does not honour the essential request and answers with the acr it has:
    // the front turns the claims request into voluntary acr_values (Core §3.1.2.1) on the way in.
    front.intercept((req) => {
      if (req.path !== '/auth' || !req.query.has('claims')) return undefined;
      const query = new URLSearchParams(req.query);
      const values = (JSON.parse(query.get('claims') as string) as { id_token: { acr: { values: string[] } } }).id_token.acr.values;
      query.delete('claims');
      query.set('acr_values', values.join(' '));
      return { status: 302, headers: { location: `${front.url}/auth?${query}` } };
    });
  });

  afterAll(async () => {
    await gateway?.close();
    await provider?.close();
    await front?.close();
  });

  it('refuses the sign-in when the ID token acr is not one asked for: no session', async () => {
    const client = new BrowserClient();
    const res = await client.get(`${gateway.url}/auth/login?acr_values=${encodeURIComponent('urn:example:gold')}`);
    const callback = await completeAtProvider(client, res.redirectUrl as string);
    const back = await client.get(callback, { crossSite: true, headers: { accept: 'application/json' } });
    expectErrorBody(back, 'invalid_request', 400);
    expect(client.cookies(gateway.url)[gateway.config.derived.sessionCookieName]).toBeUndefined();
  });
});
