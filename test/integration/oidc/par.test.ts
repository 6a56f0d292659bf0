/**
 * Pushed authorization requests (RFC 9126) through the real gateway and oidc-provider:
 * `oidc.pushedAuthorizationRequests` auto | always | never against a provider that offers PAR,
 * requires it, or has none; every client authentication method on the push; and a refused push.
 *
 * Mutation that fails this file: in src/oidc/authorization-request.ts usePushedRequest, change
 * `return mode === 'always' || (mode === 'auto' && (offered || required));` to
 * `return mode === 'always';` (auto no longer pushes: the browser's URL carries every parameter).
 * And in src/oidc/errors.ts fromPushError, `(error !== undefined || (status !== 401 && status !== 429))`
 * → `error !== undefined` (only JSON refusals, as 0.5.0 read them): "answers the same to a
 * refusal that is not JSON" fails (a plain-text 400 became 503 provider_unavailable).
 */
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ConfigInput } from '../../../src/config/schema.js';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { expectErrorBody, pushedSignInSecrets, tokensOfSession } from '../../support/assertions.js';
import { dumpRedis } from '../../support/redis-dump.js';
import { findSecrets } from '../../support/secrets.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { startProviderFront, startFrontedProvider, oauthError, type ProviderFront } from '../../support/provider-front.js';

type Mode = 'auto' | 'always' | 'never';
type Offer = 'off' | 'offered' | 'required';
const csrf = { 'x-csrf': '1' };

interface Setup {
  gw: TestGateway;
  provider: TestProvider;
  close(): Promise<void>;
}

async function setUp(offer: Offer, mode: Mode, auth: { client?: Record<string, unknown>; oidc?: Partial<NonNullable<ConfigInput['oidc']>> } = {}): Promise<Setup> {
  const reserved = await reserveServer();
  const client = gatewayClient(reserved.url, auth.client);
  const provider = await startTestProvider({ clients: [client as Parameters<typeof startTestProvider>[0]['clients'][number]], pushedAuthorizationRequests: offer });
  const config = buildTestConfig({ issuer: provider.issuer, publicUrl: reserved.url, oidc: { pushedAuthorizationRequests: mode, ...auth.oidc } });
  const gw = await startTestGateway(config, reserved);
  return {
    gw,
    provider,
    async close() {
      await gw.close();
      await provider.close();
    },
  };
}

const loginCookies = (client: BrowserClient, gw: TestGateway) =>
  Object.keys(client.cookies(gw.url)).filter((n) => n.startsWith(gw.config.derived.loginCookieName));

/** Signs in; the authorization URL the browser was sent to. */
async function signInThrough(gw: TestGateway): Promise<URL> {
  const client = new BrowserClient();
  const result = await signIn(client, gw.url);
  expect(result.final.url).toBe(`${gw.url}/`);
  expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
  return result.authorizeUrl;
}

describe('a provider that offers PAR', () => {
  let setup: Setup;
  beforeAll(async () => {
    setup = await setUp('offered', 'auto');
  });
  afterAll(() => setup?.close());

  it('auto: the browser URL carries only client_id and request_uri, one request_uri per login', async () => {
    const first = await signInThrough(setup.gw);
    expect([...first.searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
    expect(first.searchParams.get('client_id')).toBe('bff-test');
    expect(first.searchParams.get('request_uri')).toMatch(/^urn:ietf:params:oauth:request_uri:/);
    const second = await signInThrough(setup.gw);
    expect(second.searchParams.get('request_uri')).not.toBe(first.searchParams.get('request_uri'));
  });

  it('auto: a pushed sign-in gets a refresh token (the dev provider keeps offline_access), and no code, request_uri, token or client secret reaches the log or Redis in plaintext', async () => {
    // Issue 15 follow-up. Mutation that fails it: in src/dev/idp/offline-access.ts
    // addConsentToPush, `if (ctx.status !== 201) return;` → `return;` (no refresh token).
    const client = new BrowserClient();
    const result = await signIn(client, setup.gw.url);
    const cookie = client.cookies(setup.gw.url)[setup.gw.config.derived.sessionCookieName] as string;
    const tokens = await tokensOfSession(setup.gw, cookie);
    expect(tokens?.refreshToken).toBeDefined();
    const secrets = {
      ...pushedSignInSecrets(result, tokens),
      clientSecret: setup.gw.config.oidc.clientSecret,
      cookie,
    };
    expect(Object.values(secrets).every((v) => typeof v === 'string' && v.length > 0)).toBe(true);
    expect(findSecrets(setup.gw.logs.join('\n'), secrets)).toEqual([]);
    const { url, keyPrefix } = setup.gw.config.redis;
    expect(findSecrets((await dumpRedis(url ?? '', `${keyPrefix}*`)).join('\n'), secrets)).toEqual([]);
  });

  it('auto: login parameters travel in the push, not in the URL', async () => {
    const client = new BrowserClient();
    const res = await client.get(`${setup.gw.url}/auth/login?max_age=300&prompt=login`);
    const url = new URL(res.redirectUrl as string);
    expect([...url.searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
  });
});

describe('never, with a provider that offers PAR', () => {
  let setup: Setup;
  beforeAll(async () => {
    setup = await setUp('offered', 'never');
  });
  afterAll(() => setup?.close());

  it('puts the whole request in the browser URL', async () => {
    const url = await signInThrough(setup.gw);
    expect(url.searchParams.get('request_uri')).toBeNull();
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('state')).toBeTruthy();
  });
});

describe('a provider that requires PAR', () => {
  let auto: Setup;
  let never: Setup;
  beforeAll(async () => {
    auto = await setUp('required', 'auto');
    never = await setUp('required', 'never');
  });
  afterAll(async () => {
    await auto?.close();
    await never?.close();
  });

  it('auto: pushes, and the sign-in completes', async () => {
    const url = await signInThrough(auto.gw);
    expect([...url.searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
  });

  it('never: answers 503 provider_unavailable at /auth/login instead of a provider error page', async () => {
    expect(never.gw.logs.some((l) => l.includes('"event":"par_mismatch"'))).toBe(true);
    expect(auto.gw.logs.some((l) => l.includes('"event":"par_mismatch"'))).toBe(false);
    const client = new BrowserClient();
    const res = await client.get(`${never.gw.url}/auth/login`, { headers: { accept: 'application/json' } });
    expectErrorBody(res, 'provider_unavailable', 503);
    expect(loginCookies(client, never.gw)).toEqual([]);
  });
});

describe('always, with a provider without PAR', () => {
  let setup: Setup;
  beforeAll(async () => {
    setup = await setUp('off', 'always');
  });
  afterAll(() => setup?.close());

  it('says so in the log once the metadata is loaded, and answers each login 503 provider_unavailable, starting none', async () => {
    expect(setup.gw.logs.filter((l) => l.includes('"event":"par_mismatch"') && l.includes('"level":50'))).toHaveLength(1);
    const metadata = (await (await fetch(`${setup.provider.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
    expect(metadata.pushed_authorization_request_endpoint).toBeUndefined();
    const client = new BrowserClient();
    const res = await client.get(`${setup.gw.url}/auth/login`, { headers: { accept: 'application/json' } });
    expectErrorBody(res, 'provider_unavailable', 503);
    expect(loginCookies(client, setup.gw)).toEqual([]);
  });
});

describe('PAR with each client authentication method', () => {
  let jwksServer: http.Server;
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });

  beforeAll(async () => {
    const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'gateway-par-key' };
    jwksServer = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
    await new Promise<void>((r) => jwksServer.listen(0, '127.0.0.1', r));
  });
  afterAll(() => new Promise<void>((r) => (jwksServer ? jwksServer.close(() => r()) : r())));

  it.each(['client_secret_basic', 'client_secret_post', 'private_key_jwt'] as const)(
    '%s: the provider (which accepts only that method) takes the push and the code exchange',
    async (method) => {
      const jwksUri = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks`;
      const setup = await setUp('required', 'auto', {
        client: { token_endpoint_auth_method: method, ...(method === 'private_key_jwt' ? { jwks_uri: jwksUri } : {}) },
        oidc: {
          clientAuthMethod: method,
          ...(method === 'private_key_jwt' ? { privateKey: privateKey.export({ format: 'pem', type: 'pkcs8' }) as string } : {}),
        },
      });
      try {
        const url = await signInThrough(setup.gw);
        expect([...url.searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
      } finally {
        await setup.close();
      }
    },
  );
});

describe('a push the provider refuses', () => {
  let front: ProviderFront;
  let provider: TestProvider;
  let gw: TestGateway;

  beforeAll(async () => {
    front = await startProviderFront();
    const reserved = await reserveServer();
    provider = await startFrontedProvider(front, { clients: [gatewayClient(reserved.url)], pushedAuthorizationRequests: 'offered' });
    gw = await startTestGateway(buildTestConfig({ issuer: front.url, publicUrl: reserved.url }), reserved);
    front.intercept((req) => (req.method === 'POST' && req.path === '/request' ? oauthError(400, 'invalid_request', 'no') : undefined));
  });
  afterAll(async () => {
    await gw?.close();
    await provider?.close();
    await front?.close();
  });

  it('answers 400 invalid_request, with no redirect and no login started', async () => {
    const client = new BrowserClient();
    const res = await client.get(`${gw.url}/auth/login`, { headers: { accept: 'application/json' } });
    expectErrorBody(res, 'invalid_request', 400);
    expect(res.headers.get('location')).toBeNull();
    expect(loginCookies(client, gw)).toEqual([]);
    expect(front.count('POST', '/request')).toBe(1);
    // The provider's own words stay out of the browser's answer.
    expect(res.text).not.toContain('"no"');
  });

  it("answers the same to a refusal that is not JSON; a 5xx or a bare 401 is the provider's", async () => {
    for (const [answer, code, status] of [
      [{ status: 400, headers: { 'content-type': 'text/plain' }, body: 'Bad Request' }, 'invalid_request', 400],
      [{ status: 400, body: '' }, 'invalid_request', 400],
      [{ status: 401, headers: { 'content-type': 'text/html' }, body: '<h1>401</h1>' }, 'provider_unavailable', 503],
      [{ status: 502, headers: { 'content-type': 'text/html' }, body: '<h1>bad gateway</h1>' }, 'provider_unavailable', 503],
    ] as const) {
      front.intercept((req) => (req.method === 'POST' && req.path === '/request' ? answer : undefined));
      const res = await new BrowserClient().get(`${gw.url}/auth/login`, { headers: { accept: 'application/json' } });
      expectErrorBody(res, code, status);
      expect(res.text).not.toContain('Bad Request');
    }
    front.intercept((req) => (req.method === 'POST' && req.path === '/request' ? oauthError(400, 'invalid_request', 'no') : undefined));
  });
});
