/**
 * The development provider (src/dev/idp.ts), driven by a hand-made openid-client v6 client
 * and a scripted browser. These tests double as its documentation: PKCE, refresh rotation
 * with reuse detection, introspection, revocation, consent wording, the Connected
 * applications page, resource indicators and back-channel logout.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLocalJWKSet, decodeJwt, jwtVerify, type JWTPayload } from 'jose';
import * as oidc from 'openid-client';
import { BrowserClient } from '../../support/browser-client.js';
import { authorizeAtProvider, completeAtProvider, parseForms, visibleText } from '../../support/drive-login.js';
import { BACKCHANNEL_LOGOUT_EVENT, startTestProvider, type DevClient, type TestProvider } from '../../support/oidc-provider.js';

const API = 'https://api.example.test';
const ORDERS = 'https://orders.example.test';
const REDIRECT_URI = 'http://127.0.0.1:9/cb';
const POST_LOGOUT_URI = 'http://127.0.0.1:9/';
const FULL_SCOPE = 'openid profile email offline_access';

interface LogoutReceiver {
  url: string;
  tokens: string[];
  close(): Promise<void>;
}

/** A tiny relying-party endpoint that records the logout tokens it is sent. */
async function startLogoutReceiver(): Promise<LogoutReceiver> {
  const tokens: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      const token = new URLSearchParams(body).get('logout_token');
      if (req.method === 'POST' && token) tokens.push(token);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/backchannel-logout`,
    tokens,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

let receiver: LogoutReceiver;
let provider: TestProvider;
let appClient: DevClient;

beforeAll(async () => {
  receiver = await startLogoutReceiver();
  appClient = {
    client_id: 'app',
    client_secret: 'app-secret-0123456789',
    client_name: 'Demo <App>',
    redirect_uris: [REDIRECT_URI],
    post_logout_redirect_uris: [POST_LOGOUT_URI],
    backchannel_logout_uri: receiver.url,
    grant_types: ['authorization_code', 'refresh_token'],
  };
  provider = await startTestProvider({
    clients: [
      appClient,
      { client_id: 'other', client_secret: 'other-secret-0123456789', redirect_uris: [REDIRECT_URI] },
      { client_id: 'svc', client_secret: 'svc-secret-0123456789', grant_types: ['client_credentials'] },
    ],
    scopes: { 'api:read': 'Read data from the demo API', 'orders:read': 'See your orders' },
    resourceServers: { [API]: { scope: 'api:read api:write' }, [ORDERS]: { scope: 'orders:read' } },
  });
});

afterAll(async () => {
  await provider?.close();
  await receiver?.close();
});

async function rp(clientId = 'app', secret = appClient.client_secret, issuer = provider.issuer): Promise<oidc.Configuration> {
  return oidc.discovery(new URL(issuer), clientId, undefined, oidc.ClientSecretBasic(secret), { execute: [oidc.allowInsecureRequests] });
}

interface Flow {
  config: oidc.Configuration;
  tokens: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers;
  callback: URL;
  providerUrls: string[];
}

/** The authorization code flow as a relying party runs it, with a browser at the provider. */
async function codeFlow(browser: BrowserClient, opts: { scope?: string; resource?: string; user?: string; issuer?: string } = {}): Promise<Flow> {
  const config = await rp('app', appClient.client_secret, opts.issuer ?? provider.issuer);
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT_URI,
    scope: opts.scope ?? FULL_SCOPE,
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...(opts.resource ? { resource: opts.resource } : {}),
  });
  const run = await authorizeAtProvider(browser, url, opts.user ? { user: opts.user } : {});
  const callback = new URL(run.callbackUrl);
  const tokens = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
  return { config, tokens, callback, providerUrls: run.hops.map((h) => h.url) };
}

async function oauthError(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
  } catch (err) {
    return (err as { error?: string }).error;
  }
  throw new Error('expected an OAuth error');
}

async function verifyWithProviderKeys(token: string): Promise<{ payload: JWTPayload; typ: string | undefined }> {
  const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(provider.idp.jwks), { issuer: provider.issuer });
  return { payload, typ: protectedHeader.typ };
}

/** Opens the authorization URL, signs in, and returns the consent page. */
async function consentPageFor(browser: BrowserClient, params: Record<string, string>) {
  const config = await rp();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT_URI,
    code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
    code_challenge_method: 'S256',
    state: oidc.randomState(),
    ...params,
  });
  const loginPage = (await browser.follow(await browser.get(url))).final;
  const login = parseForms(loginPage.text, loginPage.url).find((f) => 'password' in f.fields);
  if (!login) throw new Error(`no login form: ${visibleText(loginPage.text)}`);
  const posted = await browser.post(login.action, { form: { ...login.fields, login: 'alice', password: 'alice-password' } });
  return (await browser.follow(posted)).final;
}

describe('discovery', () => {
  it('advertises code + PKCE S256 only, RFC 9207 iss, revocation, introspection, end-session and back-channel logout', async () => {
    const meta = (await (await fetch(`${provider.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
    expect(meta.issuer).toBe(provider.issuer);
    expect(meta.response_types_supported).toEqual(['code']);
    expect(meta.code_challenge_methods_supported).toEqual(['S256']);
    expect(meta.authorization_response_iss_parameter_supported).toBe(true);
    expect(meta.backchannel_logout_supported).toBe(true);
    expect(meta.backchannel_logout_session_supported).toBe(true);
    expect(meta.grant_types_supported).toEqual(expect.arrayContaining(['authorization_code', 'refresh_token', 'client_credentials']));
    for (const endpoint of ['revocation_endpoint', 'introspection_endpoint', 'end_session_endpoint', 'jwks_uri']) {
      expect(meta[endpoint]).toEqual(expect.stringContaining(provider.issuer));
    }
    const jwks = (await (await fetch(meta.jwks_uri as string)).json()) as { keys: Record<string, unknown>[] };
    expect(jwks.keys[0]).toMatchObject({ kty: 'RSA', alg: 'RS256', kid: expect.any(String) });
    expect(jwks.keys[0]).not.toHaveProperty('d');
  });
});

describe('authorization code flow', () => {
  it('rejects an authorization request without code_challenge (PKCE is required)', async () => {
    const browser = new BrowserClient();
    const url = new URL(`${provider.issuer}/auth`);
    url.search = new URLSearchParams({ client_id: 'app', response_type: 'code', scope: 'openid', redirect_uri: REDIRECT_URI, state: 'xyz' }).toString();
    const res = await browser.get(url);
    expect(res.status).toBe(303);
    const back = new URL(res.redirectUrl ?? '');
    expect(back.origin + back.pathname).toBe(REDIRECT_URI);
    expect(back.searchParams.get('error')).toBe('invalid_request');
    expect(back.searchParams.get('error_description')).toMatch(/PKCE/);
    expect(back.searchParams.get('state')).toBe('xyz');
    expect(back.searchParams.has('code')).toBe(false);
  });

  it('yields access, refresh and ID tokens, with iss in the authorization response and sid in the ID token', async () => {
    const before = provider.counters.grants.authorization_code ?? 0;
    const { tokens, callback } = await codeFlow(new BrowserClient());
    expect(callback.searchParams.get('iss')).toBe(provider.issuer);
    expect(tokens.access_token).toEqual(expect.any(String));
    expect(tokens.refresh_token).toEqual(expect.any(String));
    expect(tokens.token_type.toLowerCase()).toBe('bearer');
    expect(tokens.expires_in).toBeGreaterThan(0);
    expect(tokens.expires_in).toBeLessThanOrEqual(60);
    const claims = tokens.claims();
    expect(claims).toMatchObject({
      iss: provider.issuer,
      aud: 'app',
      sub: 'alice',
      name: 'Alice Liddell',
      email: 'alice@example.com',
      email_verified: true,
      sid: expect.any(String),
    });
    expect(provider.counters.grants.authorization_code).toBe(before + 1);
  });

  it('asks for consent the first time only, and still issues a refresh token on the next sign-in', async () => {
    const browser = new BrowserClient();
    const first = await codeFlow(browser);
    expect(first.providerUrls.some((u) => /\/interaction\/[^/]+\/confirm$/.test(u))).toBe(true);
    const second = await codeFlow(browser);
    expect(second.providerUrls.some((u) => u.includes('/interaction/'))).toBe(false);
    expect(second.tokens.refresh_token).toEqual(expect.any(String));
    expect(await provider.introspect(second.tokens.refresh_token as string)).toMatchObject({ active: true, sub: 'alice' });
  });

  it('shows an error and the form again after a wrong password', async () => {
    const browser = new BrowserClient();
    const config = await rp();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT_URI,
      scope: 'openid',
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
    });
    const page = (await browser.follow(await browser.get(url))).final;
    const form = parseForms(page.text, page.url).find((f) => 'password' in f.fields);
    expect(form).toBeDefined();
    const wrong = await browser.post(form?.action ?? '', { form: { ...form?.fields, login: 'alice', password: 'nope' } });
    expect(wrong.status).toBe(401);
    expect(visibleText(wrong.text)).toContain('Wrong username or password');
    expect(parseForms(wrong.text, wrong.url).some((f) => 'password' in f.fields)).toBe(true);
  });
});

describe('refresh tokens', () => {
  it('rotates on every refresh; reusing a rotated one fails and revokes the grant, so the newest fails too', async () => {
    const { config, tokens } = await codeFlow(new BrowserClient());
    const first = tokens.refresh_token as string;
    const refreshed = await oidc.refreshTokenGrant(config, first);
    const second = refreshed.refresh_token as string;
    expect(second).toEqual(expect.any(String));
    expect(second).not.toBe(first);
    expect(refreshed.claims()?.sub).toBe('alice');

    expect(await oauthError(oidc.refreshTokenGrant(config, first))).toBe('invalid_grant');
    expect(await oauthError(oidc.refreshTokenGrant(config, second))).toBe('invalid_grant');
    expect((await provider.introspect(refreshed.access_token)).active).toBe(false);
  });

  it('counts every token request by grant type, failures included', async () => {
    const { config, tokens } = await codeFlow(new BrowserClient());
    const before = { ...provider.counters.grants };
    const failuresBefore = provider.counters.grantFailures.refresh_token ?? 0;
    await oidc.refreshTokenGrant(config, tokens.refresh_token as string);
    await oauthError(oidc.refreshTokenGrant(config, 'not-a-refresh-token'));
    expect(provider.counters.grants.refresh_token).toBe((before.refresh_token ?? 0) + 2);
    expect(provider.counters.grantFailures.refresh_token).toBe(failuresBefore + 1);
  });
});

describe('introspection and revocation', () => {
  it('introspects tokens for the client they were issued to, and only for it', async () => {
    const { tokens } = await codeFlow(new BrowserClient());
    const before = provider.counters.introspections;
    const own = await provider.introspect(tokens.access_token);
    expect(own).toMatchObject({ active: true, sub: 'alice', client_id: 'app', iss: provider.issuer });
    expect(String(own.scope).split(' ')).toEqual(expect.arrayContaining(['openid', 'profile', 'email']));
    const stranger = await provider.introspect(tokens.access_token, { client_id: 'other', client_secret: 'other-secret-0123456789' });
    expect(stranger).toEqual({ active: false });
    expect((await provider.introspect('garbage')).active).toBe(false);
    expect(provider.counters.introspections).toBe(before + 3);
  });

  it('revokes every token of the grant when an access token is revoked, but keeps the consent', async () => {
    const browser = new BrowserClient();
    const { config, tokens } = await codeFlow(browser);
    const before = provider.counters.revocations;
    await oidc.tokenRevocation(config, tokens.access_token);
    expect((await provider.introspect(tokens.access_token)).active).toBe(false);
    // oidc-provider's choice (RFC 7009 §2.1 allows it): the grant's other tokens go too.
    expect((await provider.introspect(tokens.refresh_token as string)).active).toBe(false);
    expect(provider.counters.revocations).toBe(before + 1);
    const again = await codeFlow(browser);
    expect(again.providerUrls.some((u) => u.includes('/interaction/'))).toBe(false);
  });

  it('destroys the whole grant when a refresh token is revoked, so consent is asked again', async () => {
    const browser = new BrowserClient();
    const { config, tokens } = await codeFlow(browser);
    await oidc.tokenRevocation(config, tokens.refresh_token as string);
    expect((await provider.introspect(tokens.refresh_token as string)).active).toBe(false);
    expect((await provider.introspect(tokens.access_token)).active).toBe(false);
    expect(await oauthError(oidc.refreshTokenGrant(config, tokens.refresh_token as string))).toBe('invalid_grant');
    const again = await codeFlow(browser);
    expect(again.providerUrls.some((u) => /\/confirm$/.test(u))).toBe(true);
    expect(again.providerUrls.some((u) => /\/login$/.test(u))).toBe(false);
  });
});

describe('consent page', () => {
  it('lists every requested scope in plain words, says it is a development provider, and escapes what it shows', async () => {
    const page = await consentPageFor(new BrowserClient(), { scope: `${FULL_SCOPE} api:read`, resource: API });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    const text = visibleText(page.text);
    for (const words of [
      'Confirm who you are',
      'See your name',
      'See your email address',
      'Stay signed in when you are away (refresh tokens)',
      'Read data from the demo API',
    ]) {
      expect(text).toContain(words);
    }
    expect(text).toMatch(/not for production/i);
    expect(page.text).toContain('Demo &lt;App&gt;');
    expect(page.text).not.toContain('Demo <App>');
    const actions = parseForms(page.text, page.url).map((f) => ({ path: new URL(f.action).pathname, buttons: f.buttons.map((b) => b.text) }));
    expect(actions).toEqual([
      { path: expect.stringMatching(/^\/interaction\/[^/]+\/confirm$/), buttons: ['Approve'] },
      { path: expect.stringMatching(/^\/interaction\/[^/]+\/abort$/), buttons: ['Deny'] },
    ]);
  });

  it('returns error=access_denied to the redirect URI when the user clicks Deny', async () => {
    const config = await rp();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT_URI,
      scope: FULL_SCOPE,
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      state: 'deny-state',
    });
    const callback = new URL(await completeAtProvider(new BrowserClient(), url, { consent: 'deny' }));
    expect(callback.origin + callback.pathname).toBe(REDIRECT_URI);
    expect(callback.searchParams.get('error')).toBe('access_denied');
    expect(callback.searchParams.get('state')).toBe('deny-state');
    expect(callback.searchParams.get('iss')).toBe(provider.issuer);
    expect(callback.searchParams.has('code')).toBe(false);
  });
});

describe('Connected applications', () => {
  it('lists the client the user granted, and Revoke kills its tokens but not the password', async () => {
    const browser = new BrowserClient();
    const { config, tokens } = await codeFlow(browser, { user: 'bob' });
    const page = await browser.get(`${provider.issuer}/account`);
    expect(page.status).toBe(200);
    const text = visibleText(page.text);
    expect(text).toContain('Connected applications');
    expect(text).toContain('Demo <App>');
    expect(text).toContain('Stay signed in when you are away (refresh tokens)');
    expect(text).toMatch(/not for production/i);

    const revoke = parseForms(page.text, page.url).find((f) => f.fields.client_id === 'app');
    expect(revoke?.buttons.map((b) => b.text)).toEqual(['Revoke']);

    // Without the page's CSRF token nothing happens; nor from another site, which cannot
    // send the SameSite=Strict CSRF cookie even with a copy of the form.
    const forged = await browser.post(revoke?.action ?? '', { form: { client_id: 'app' } });
    expect(forged.status).toBe(403);
    const crossSite = await browser.post(revoke?.action ?? '', { form: revoke?.fields ?? {}, crossSite: true });
    expect(crossSite.status).toBe(403);
    expect((await provider.introspect(tokens.access_token)).active).toBe(true);

    const done = await browser.post(revoke?.action ?? '', { form: revoke?.fields ?? {} });
    expect(done.status).toBe(303);
    const after = (await browser.follow(done)).final;
    expect(visibleText(after.text)).toContain('No application has access to your account');

    expect((await provider.introspect(tokens.access_token)).active).toBe(false);
    expect((await provider.introspect(tokens.refresh_token as string)).active).toBe(false);
    expect(await oauthError(oidc.refreshTokenGrant(config, tokens.refresh_token as string))).toBe('invalid_grant');

    // Same password, fresh browser: signing in still works, and consent is asked again.
    const again = await codeFlow(new BrowserClient(), { user: 'bob' });
    expect(again.providerUrls.some((u) => /\/confirm$/.test(u))).toBe(true);
    expect(again.tokens.claims()?.sub).toBe('bob');
  });

  it('asks who you are when there is no provider session', async () => {
    const browser = new BrowserClient();
    await codeFlow(new BrowserClient(), { user: 'alice' });
    const page = await browser.get(`${provider.issuer}/account`);
    const login = parseForms(page.text, page.url).find((f) => 'password' in f.fields);
    expect(new URL(login?.action ?? '').pathname).toBe('/account/login');
    const signedIn = await browser.post(login?.action ?? '', { form: { ...login?.fields, login: 'alice', password: 'alice-password' } });
    expect(signedIn.status).toBe(303);
    const list = (await browser.follow(signedIn)).final;
    expect(visibleText(list.text)).toContain('Signed in as Alice Liddell');
    expect(parseForms(list.text, list.url).some((f) => f.fields.client_id === 'app')).toBe(true);
    expect(browser.cookies(provider.issuer)).toHaveProperty('devidp_account');

    const signOut = parseForms(list.text, list.url).find((f) => new URL(f.action).pathname === '/account/logout');
    const out = await browser.post(signOut?.action ?? '', { form: signOut?.fields ?? {} });
    expect([out.status, new URL(out.redirectUrl ?? '').pathname]).toEqual([303, '/session/end']);
    expect(browser.cookies(provider.issuer)).not.toHaveProperty('devidp_account');
    const back = await browser.get(`${provider.issuer}/account`);
    expect(parseForms(back.text, back.url).some((f) => 'password' in f.fields)).toBe(true);
  });

  it('revokeGrantsFor does what the button does', async () => {
    const { tokens } = await codeFlow(new BrowserClient(), { user: 'bob' });
    expect(await provider.revokeGrantsFor('bob', 'app')).toBeGreaterThanOrEqual(1);
    expect((await provider.introspect(tokens.refresh_token as string)).active).toBe(false);
    expect(await provider.idp.connectedApplications('bob')).toEqual([]);
  });
});

describe('resource indicators', () => {
  it('gives client_credentials with a resource a JWT access token whose aud is that resource', async () => {
    const config = await rp('svc', 'svc-secret-0123456789');
    const res = await oidc.clientCredentialsGrant(config, { resource: ORDERS, scope: 'orders:read api:read' });
    const { payload, typ } = await verifyWithProviderKeys(res.access_token);
    expect(typ).toBe('at+jwt');
    expect(payload).toMatchObject({ aud: ORDERS, client_id: 'svc', sub: 'svc', scope: 'orders:read' });
    expect(provider.counters.grants.client_credentials).toBeGreaterThanOrEqual(1);
    expect(await provider.introspect(res.access_token, { client_id: 'svc', client_secret: 'svc-secret-0123456789' })).toMatchObject({ active: true, emulated: true });
  });

  it('keeps issuing JWTs for the granted resource on refresh without `resource`; revoking the grant marks them inactive', async () => {
    const { config, tokens } = await codeFlow(new BrowserClient(), { scope: `${FULL_SCOPE} api:read`, resource: API });
    expect(decodeJwt(tokens.access_token)).toMatchObject({ aud: API, scope: 'api:read', sub: 'alice' });
    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token as string);
    const { payload } = await verifyWithProviderKeys(refreshed.access_token);
    expect(payload).toMatchObject({ aud: API, scope: 'api:read' });
    expect(refreshed.claims()?.email).toBe('alice@example.com');

    expect((await provider.introspect(refreshed.access_token)).active).toBe(true);
    await oidc.tokenRevocation(config, refreshed.refresh_token as string);
    expect((await provider.introspect(refreshed.access_token)).active).toBe(false);
  });

  it('uses defaultResource when the authorization request names none', async () => {
    const withDefault = await startTestProvider({
      clients: [appClient],
      resourceServers: { [API]: { scope: 'api:read', accessTokenTTL: 30 } },
      scopes: { 'api:read': 'Read data from the demo API' },
      defaultResource: API,
    });
    try {
      const { config, tokens } = await codeFlow(new BrowserClient(), { scope: `${FULL_SCOPE} api:read`, issuer: withDefault.issuer });
      expect(decodeJwt(tokens.access_token)).toMatchObject({ aud: API, scope: 'api:read', iss: withDefault.issuer });
      expect(tokens.expires_in).toBe(30);
      const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token as string);
      expect(decodeJwt(refreshed.access_token).aud).toBe(API);
    } finally {
      await withDefault.close();
    }
  });
});

describe('logout', () => {
  it('POSTs a back-channel logout token to the client on RP-initiated logout', async () => {
    const browser = new BrowserClient();
    const { config, tokens } = await codeFlow(browser);
    const sid = tokens.claims()?.sid;
    const received = receiver.tokens.length;
    const delivered = provider.counters.backchannelLogouts;

    const endSession = oidc.buildEndSessionUrl(config, { id_token_hint: tokens.id_token as string, post_logout_redirect_uri: POST_LOGOUT_URI, state: 'bye' });
    const confirm = (await browser.follow(await browser.get(endSession))).final;
    expect(visibleText(confirm.text)).toMatch(/not for production/i);
    const form = parseForms(confirm.text, confirm.url).find((f) => f.buttons.some((b) => b.value === 'yes'));
    expect(form).toBeDefined();
    const done = await browser.post(form?.action ?? '', { form: { ...form?.fields, logout: 'yes' } });
    expect(done.status).toBe(303);
    expect(done.redirectUrl).toBe(`${POST_LOGOUT_URI}?state=bye`);

    expect(receiver.tokens.length).toBe(received + 1);
    const token = receiver.tokens[received] as string;
    const { payload, typ } = await verifyWithProviderKeys(token);
    expect(typ).toBe('logout+jwt');
    expect(payload).toMatchObject({ aud: 'app', sub: 'alice', sid, events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } });
    expect(payload).not.toHaveProperty('nonce');
    expect(provider.counters.backchannelLogouts).toBe(delivered + 1);
  });

  it('signLogoutToken forges tokens that verify with the provider keys, or with a foreign key that does not', async () => {
    const good = await provider.signLogoutToken({ sub: 'alice', sid: 'abc' });
    const { payload, typ } = await verifyWithProviderKeys(good);
    expect(typ).toBe('logout+jwt');
    expect(payload).toMatchObject({ iss: provider.issuer, aud: 'app', sub: 'alice', sid: 'abc', events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } });
    await expect(verifyWithProviderKeys(await provider.signLogoutToken({ sub: 'alice' }, { key: 'foreign' }))).rejects.toThrow();
    expect(decodeJwt(await provider.signLogoutToken({ iat: undefined, nonce: 'n' }))).not.toHaveProperty('iat');
    expect((await provider.signLogoutToken({}, { alg: 'none' })).endsWith('.')).toBe(true);
  });
});

describe('TestProvider', () => {
  it('stop() makes the provider unreachable and start() brings it back with its state', async () => {
    const { config, tokens } = await codeFlow(new BrowserClient());
    await provider.stop();
    await expect(fetch(`${provider.issuer}/.well-known/openid-configuration`)).rejects.toThrow();
    await provider.start();
    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token as string);
    expect(refreshed.access_token).toEqual(expect.any(String));
  });
});
