/**
 * Sign-in, /auth/user and logout against a real oidc-provider and a real Redis (SPEC §3, §5).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { completeAtProvider, signIn, startLogin } from '../../support/drive-login.js';
import type { TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { startStack, type Stack } from '../../support/stack.js';
import { expectErrorBody, expectNoSecretIn, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { dumpRedis } from '../../support/redis-dump.js';

let stack: Stack;
let provider: TestProvider;
let gw: TestGateway;
const csrf = { 'x-csrf': '1' };

beforeAll(async () => {
  stack = await startStack();
  ({ provider, gateway: gw } = stack);
});

afterAll(() => stack?.close());

function setCookies(res: { headers: Headers }): string[] {
  return res.headers.getSetCookie();
}

function sessionCookie(client: BrowserClient): string | undefined {
  return client.cookies(gw.url)[gw.config.derived.sessionCookieName];
}

describe('GET /auth/login', () => {
  it('redirects to the authorization endpoint with code + PKCE S256, state, nonce and the exact redirect_uri', async () => {
    const client = new BrowserClient();
    const res = await client.get(`${gw.url}/auth/login?returnTo=/orders`);
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get('location') ?? '');
    expect(location.origin + location.pathname).toBe(provider.idp.provider.issuer + '/auth');
    const q = location.searchParams;
    expect(q.get('response_type')).toBe('code');
    expect(q.get('client_id')).toBe('bff-test');
    expect(q.get('redirect_uri')).toBe(`${gw.url}/auth/callback`);
    expect(q.get('scope')).toBe('openid profile email offline_access');
    expect(q.get('code_challenge_method')).toBe('S256');
    expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('state')?.length).toBeGreaterThanOrEqual(22);
    expect(q.get('nonce')?.length).toBeGreaterThanOrEqual(22);
    expect(res.headers.get('cache-control')).toContain('no-store');

    const loginCookie = setCookies(res).find((c) => c.startsWith(`${gw.config.derived.loginCookieName}.`));
    expect(loginCookie).toBeDefined();
    expect(loginCookie).toMatch(/; HttpOnly/i);
    expect(loginCookie).toMatch(/; SameSite=Lax/i);
    expect(loginCookie).toMatch(/; Path=\/(;|$)/);
    expect(loginCookie).toMatch(/; Max-Age=600/);
  });

  it('uses fresh state, nonce and PKCE challenge for every login', async () => {
    const client = new BrowserClient();
    const params = await Promise.all(
      [1, 2].map(async () => new URL((await client.get(`${gw.url}/auth/login`)).headers.get('location') ?? '').searchParams),
    );
    for (const name of ['state', 'nonce', 'code_challenge']) expect(params[0]?.get(name)).not.toBe(params[1]?.get(name));
  });

  it.each(['https://evil.example', '//evil.example', '/\\evil.example', 'https:%2F%2Fevil.example', '%2F%2Fevil.example', 'javascript:alert(1)'])(
    'refuses returnTo=%s with 400 invalid_return_to',
    async (returnTo) => {
      const res = await new BrowserClient().get(`${gw.url}/auth/login?returnTo=${encodeURIComponent(returnTo)}`, {
        headers: { accept: 'application/json' },
      });
      expectErrorBody(res, 'invalid_return_to', 400);
    },
  );

  it('refuses a repeated returnTo parameter', async () => {
    const res = await new BrowserClient().get(`${gw.url}/auth/login?returnTo=/a&returnTo=/b`, { headers: { accept: 'application/json' } });
    expectErrorBody(res, 'invalid_request', 400);
  });
});

describe('a full sign-in', () => {
  it('ends at returnTo with an HttpOnly, SameSite=Strict session cookie and a working /auth/user without tokens', async () => {
    const client = new BrowserClient();
    const { final, hops } = await signIn(client, gw.url, { returnTo: '/orders?x=1' });
    const callbackHop = hops.find((h) => h.url.startsWith(`${gw.url}/auth/callback`));
    expect(callbackHop?.status).toBe(302);
    // Absolute, on publicUrl's origin: nothing relative for a browser to reinterpret.
    expect(callbackHop?.location).toBe(`${gw.url}/orders?x=1`);
    expect(final.url).toBe(`${gw.url}/orders?x=1`);

    const cookie = sessionCookie(client);
    expect(cookie).toBeDefined();
    const callbackResponse = callbackHop?.response;
    const set = callbackResponse ? setCookies(callbackResponse).find((c) => c.startsWith(`${gw.config.derived.sessionCookieName}=`)) : undefined;
    expect(set).toMatch(/; HttpOnly/i);
    expect(set).toMatch(/; SameSite=Strict/i);
    expect(set).toMatch(/; Path=\//);
    expect(set).not.toMatch(/Domain=/i);
    // An opaque signed ID with at least 128 bits of randomness.
    expect(sessionIdFromCookie(cookie as string).length).toBeGreaterThanOrEqual(22);

    const me = await client.get(`${gw.url}/auth/user`, { headers: csrf });
    expect(me.status).toBe(200);
    const body = me.json() as { sub: string; claims: Record<string, unknown>; scopes: string[]; sessionExpiresAt: string };
    expect(body.sub).toBe('alice');
    expect(body.claims).toMatchObject({ email: expect.any(String), name: expect.any(String) });
    expect(body.claims).not.toHaveProperty('nonce');
    expect(body.scopes).toEqual(expect.arrayContaining(['openid', 'offline_access']));
    expect(Date.parse(body.sessionExpiresAt)).toBeGreaterThan(Date.now());
    expect(me.headers.get('cache-control')).toContain('no-store');

    const tokens = await tokensOfSession(gw, cookie as string);
    expect(tokens?.refreshToken).toEqual(expect.any(String));
    expectNoSecretIn(me.text, { accessToken: tokens?.accessToken, refreshToken: tokens?.refreshToken, idToken: tokens?.idToken }, '/auth/user');
  });

  it('issues a new session ID at sign-in, so a planted cookie is never promoted (no fixation)', async () => {
    const attacker = new BrowserClient();
    await signIn(attacker, gw.url, { user: 'bob', password: 'bob-password' });
    const planted = sessionCookie(attacker) as string;

    const victim = new BrowserClient();
    victim.setCookie(gw.url, gw.config.derived.sessionCookieName, planted);
    await signIn(victim, gw.url);
    const after = sessionCookie(victim);
    expect(after).toBeDefined();
    expect(after).not.toBe(planted);
    const me = (await victim.get(`${gw.url}/auth/user`, { headers: csrf })).json() as { sub: string };
    expect(me.sub).toBe('alice');
  });

  it('lets two tabs of one browser sign in at the same time', async () => {
    const client = new BrowserClient();
    const first = await startLogin(client, gw.url, { returnTo: '/one' });
    const second = await startLogin(client, gw.url, { returnTo: '/two' });
    const callbackTwo = await completeAtProvider(client, second.authorizeUrl, {});
    const callbackOne = await completeAtProvider(client, first.authorizeUrl, {});
    const two = await client.get(callbackTwo);
    const one = await client.get(callbackOne);
    expect([two.status, two.headers.get('location')]).toEqual([302, `${gw.url}/two`]);
    expect([one.status, one.headers.get('location')]).toEqual([302, `${gw.url}/one`]);
  });

  it('keeps no token in plaintext anywhere in Redis', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    const tokens = await tokensOfSession(gw, sessionCookie(client) as string);
    expect(tokens?.accessToken).toBeDefined();
    const dump = await dumpRedis(gw.config.redis.url as string, `${gw.config.redis.keyPrefix}*`);
    expect(dump.length).toBeGreaterThan(0);
    expectNoSecretIn(dump.join('\n'), {
      accessToken: tokens?.accessToken,
      refreshToken: tokens?.refreshToken,
      idToken: tokens?.idToken,
      sessionCookie: sessionIdFromCookie(sessionCookie(client) as string),
    }, 'Redis');
  });
});

describe('GET /auth/callback', () => {
  it('refuses an unknown state with 400 invalid_state and creates no session', async () => {
    const client = new BrowserClient();
    const res = await client.get(`${gw.url}/auth/callback?code=x&state=unknown-state-value`, { headers: { accept: 'application/json' } });
    expectErrorBody(res, 'invalid_state', 400);
    expect(sessionCookie(client)).toBeUndefined();
  });

  it('refuses a replayed callback: the state is good once', async () => {
    const client = new BrowserClient();
    const { authorizeUrl } = await startLogin(client, gw.url, {});
    const callback = await completeAtProvider(client, authorizeUrl, {});
    expect((await client.get(callback)).status).toBe(302);
    const replay = await client.get(callback, { headers: { accept: 'application/json' } });
    expectErrorBody(replay, 'invalid_state', 400);
  });

  it('refuses a callback in a browser that did not start the login (login CSRF)', async () => {
    const victim = new BrowserClient();
    const attacker = new BrowserClient();
    const { authorizeUrl } = await startLogin(attacker, gw.url, {});
    const callback = await completeAtProvider(attacker, authorizeUrl, {});
    const res = await victim.get(callback, { headers: { accept: 'application/json' } });
    expectErrorBody(res, 'invalid_state', 400);
    expect(sessionCookie(victim)).toBeUndefined();
    // Only the browser that started a login can spend it (see the next test): here that is the
    // attacker, whose own sign-in it is.
    expect((await attacker.get(callback)).status).toBe(302);
  });

  // Fails if, in session/transactions.ts take, `|| tx.binding !== binding` is removed: the
  // callback with a wrong login cookie then spends the transaction, and the real one is refused.
  // (Before the fix, the cookieless callback alone spent it: the transaction was taken first.)
  it("leaves a pending sign-in alone when a callback for its state comes without that browser's login cookie", async () => {
    const owner = new BrowserClient();
    const { authorizeUrl } = await startLogin(owner, gw.url, {});
    // The state is in the provider page's URL (no PAR), so others may learn it.
    const state = authorizeUrl.searchParams.get('state') as string;
    const loginCookie = Object.keys(owner.cookies(gw.url)).find((name) => name.startsWith(`${gw.config.derived.loginCookieName}.`)) as string;
    expect(loginCookie).toBeDefined();

    const forged = `${gw.url}/auth/callback?code=forged&state=${encodeURIComponent(state)}&iss=${encodeURIComponent(provider.issuer)}`;
    const cookieless = new BrowserClient();
    expectErrorBody(await cookieless.get(forged, { headers: { accept: 'application/json' } }), 'invalid_state', 400);
    const wrongCookie = new BrowserClient();
    wrongCookie.setCookie(gw.url, loginCookie, 'not-the-binding');
    expectErrorBody(await wrongCookie.get(forged, { headers: { accept: 'application/json' } }), 'invalid_state', 400);

    const callback = await completeAtProvider(owner, authorizeUrl, {});
    expect((await owner.get(callback)).status).toBe(302);
    expect((await owner.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
  });

  it('refuses a response whose iss names another issuer (RFC 9207) and creates no session', async () => {
    const client = new BrowserClient();
    const { authorizeUrl } = await startLogin(client, gw.url, {});
    const callback = new URL(await completeAtProvider(client, authorizeUrl, {}));
    expect(callback.searchParams.get('iss')).toBe(provider.issuer);
    const forged = new URL(callback);
    forged.searchParams.set('iss', 'https://attacker.example');
    const res = await client.get(forged.href, { headers: { accept: 'application/json' } });
    expectErrorBody(res, 'invalid_request', 400);
    expect(sessionCookie(client)).toBeUndefined();
    // Refused before the transaction was taken: the provider's own answer still signs in.
    expect((await client.get(callback.href)).status).toBe(302);
    expect(sessionCookie(client)).toBeDefined();
  });

  // Fails if, in src/http/auth-routes.ts callback, an error response without iss is taken from
  // a provider that advertises authorization_response_iss_parameter_supported (RFC 9207 §2.4):
  // whoever learnt the state could end this browser's sign-in with an error of their making.
  it('refuses an error response without iss from a provider that always sends it, and the sign-in can still complete', async () => {
    expect(gw.runtime.provider.get().metadata.authorization_response_iss_parameter_supported).toBe(true);
    const client = new BrowserClient();
    const { authorizeUrl } = await startLogin(client, gw.url, {});
    const state = authorizeUrl.searchParams.get('state') as string;
    const injected = `${gw.url}/auth/callback?error=access_denied&state=${encodeURIComponent(state)}`;
    expectErrorBody(await client.get(injected, { headers: { accept: 'application/json' } }), 'invalid_request', 400);
    // Nothing of the sign-in was spent: the provider's own answer completes it.
    expect((await client.get(await completeAtProvider(client, authorizeUrl, {}))).status).toBe(302);
    expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
  });

  // The gateway and openid-client read the callback's query alike (RFC 6749 §4.1.2: unknown
  // response parameters are ignored, however many). Node's querystring, which read it before,
  // stopped at 1,000 parameters: the state after them was missing to the gateway (400
  // invalid_state), and a second state after them was seen by openid-client alone, once the
  // sign-in was spent. Both fail if src/http/query.ts queryOf reads only the first 1,000
  // (`url.slice(at + 1).split('&').slice(0, 1000).join('&')`); the second also if oneParam
  // picks the first of a repeated parameter (`query.getAll(name).slice(0, 1)`).
  const padding = Array.from({ length: 1000 }, (_, i) => `p${i}=`).join('&');

  it('ignores a thousand unknown parameters before the state, as openid-client does', async () => {
    const client = new BrowserClient();
    const { authorizeUrl } = await startLogin(client, gw.url, {});
    const callback = new URL(await completeAtProvider(client, authorizeUrl, {}));
    callback.search = `?${padding}&${callback.search.slice(1)}`;
    expect((await client.get(callback.href)).status).toBe(302);
    expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
  });

  it('refuses a second state after a thousand parameters before the sign-in is spent', async () => {
    const client = new BrowserClient();
    const { authorizeUrl } = await startLogin(client, gw.url, {});
    const callbackUrl = await completeAtProvider(client, authorizeUrl, {});
    const doubled = `${callbackUrl}&${padding}&state=other`;
    expectErrorBody(await client.get(doubled, { headers: { accept: 'application/json' } }), 'invalid_request', 400);
    expect((await client.get(callbackUrl)).status).toBe(302);
    expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
  });

  it('creates no session when the user declines consent, and tells the SPA why', async () => {
    const client = new BrowserClient();
    const { hops } = await signIn(client, gw.url, { consent: 'deny', returnTo: '/start' });
    const callbackHop = hops.find((h) => h.url.startsWith(`${gw.url}/auth/callback`));
    expect(callbackHop?.status).toBe(302);
    expect(callbackHop?.location).toBe(`${gw.url}/start?error=access_denied`);
    expect(sessionCookie(client)).toBeUndefined();
    expectErrorBody(await client.get(`${gw.url}/auth/user`, { headers: csrf }), 'login_required', 401);
  });

  it('shows a browser navigation an HTML error page with the same status', async () => {
    const res = await new BrowserClient().get(`${gw.url}/auth/callback?state=nope`, { headers: { accept: 'text/html' } });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    expect(res.text).toContain('invalid_state');
  });
});

describe('GET /auth/user', () => {
  it('answers 401 login_required without a session', async () => {
    expectErrorBody(await new BrowserClient().get(`${gw.url}/auth/user`, { headers: csrf }), 'login_required', 401);
  });

  it('answers 403 csrf_check_failed without the x-csrf header', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    expectErrorBody(await client.get(`${gw.url}/auth/user`), 'csrf_check_failed', 403);
  });

  it('treats a garbage or forged session cookie as signed out', async () => {
    const client = new BrowserClient();
    client.setCookie(gw.url, gw.config.derived.sessionCookieName, 's%3Aforged.c2lnbmF0dXJl');
    expectErrorBody(await client.get(`${gw.url}/auth/user`, { headers: csrf }), 'login_required', 401);
  });
});

describe('POST /auth/logout', () => {
  it('ends the session, revokes the refresh token at the provider and returns the end-session URL', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    const cookie = sessionCookie(client) as string;
    const tokens = await tokensOfSession(gw, cookie);
    expect((await provider.introspect(tokens?.refreshToken as string)).active).toBe(true);

    const res = await client.post(`${gw.url}/auth/logout`, { headers: csrf });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toContain('no-store');
    const { logoutUrl } = res.json() as { logoutUrl: string };
    const url = new URL(logoutUrl);
    expect(url.origin).toBe(new URL(provider.issuer).origin);
    expect(url.searchParams.get('id_token_hint')).toBe(tokens?.idToken);
    expect(url.searchParams.get('post_logout_redirect_uri')).toBe(`${gw.url}/`);
    expect(url.searchParams.get('client_id')).toBe('bff-test');
    expect(setCookies(res).some((c) => c.startsWith(`${gw.config.derived.sessionCookieName}=;`))).toBe(true);

    expect((await provider.introspect(tokens?.refreshToken as string)).active).toBe(false);
    expect(await tokensOfSession(gw, cookie)).toBeUndefined();

    // The old cookie is dead even if a browser replays it.
    const replay = new BrowserClient();
    replay.setCookie(gw.url, gw.config.derived.sessionCookieName, cookie);
    expectErrorBody(await replay.get(`${gw.url}/auth/user`, { headers: csrf }), 'login_required', 401);
  });

  it('has no effect without the x-csrf header', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    expectErrorBody(await client.post(`${gw.url}/auth/logout`), 'csrf_check_failed', 403);
    expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
  });
});

describe('health', () => {
  it('is live and ready with Redis and the provider up', async () => {
    const client = new BrowserClient();
    expect((await client.get(`${gw.url}/healthz`)).status).toBe(200);
    const ready = await client.get(`${gw.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(ready.json()).toEqual({ status: 'ready' });
  });

  it('sets helmet headers and no-store on gateway answers', async () => {
    const res = await new BrowserClient().get(`${gw.url}/auth/user`, { headers: csrf });
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
  });
});
