/**
 * DPoP against providers that do not (quite) do it, behind the tampering front: one whose
 * metadata lists no ES256 in dpop_signing_alg_values_supported is refused like a foreign issuer
 * (/readyz 503, one log line naming why, no login starts), and one that answers a code exchange
 * carrying a proof with a plain bearer token is refused (no session: fail closed, never a
 * silent downgrade).
 *
 * Mutation that fails it (checked by hand): in src/oidc/dpop.ts requireBound, return early
 * (`return;` first): the sign-in with a bearer answer succeeds.
 */
import http from 'node:http';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { isGrant, startFrontedProvider, startProviderFront, type FrontAnswer, type FrontRequest, type ProviderFront } from '../../support/provider-front.js';
import { eventually } from '../../support/wait.js';
import { startStack } from '../../support/stack.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';
import { decodeJwt } from 'jose';
import { jwkThumbprint } from '../../../src/crypto/dpop.js';

let front: ProviderFront;
let provider: TestProvider;
let first: Awaited<ReturnType<typeof reserveServer>>;
let second: Awaited<ReturnType<typeof reserveServer>>;
let third: Awaited<ReturnType<typeof reserveServer>>;
let fourth: Awaited<ReturnType<typeof reserveServer>>;

beforeAll(async () => {
  front = await startProviderFront();
  [first, second, third, fourth] = await Promise.all([reserveServer(), reserveServer(), reserveServer(), reserveServer()]);
  // One registration for the tests' gateways (each test has its own listening server).
  const redirects = [first, second, third, fourth].map((r) => `${r.url}/auth/callback`);
  provider = await startFrontedProvider(front, { clients: [gatewayClient(first.url, { redirect_uris: redirects })] });
});

afterAll(async () => {
  // A test that failed (or was filtered out) before its gateway took its server leaves it listening.
  for (const reserved of [first, second, third, fourth]) if (reserved?.server.listening) reserved.server.close();
  await provider?.close();
  await front?.close();
});

beforeEach(() => front.intercept(undefined));

const dpopConfig = (publicUrl: string) =>
  buildTestConfig({ issuer: front.url, publicUrl, routes: [{ path: '/api', target: 'http://127.0.0.1:9', auth: 'user', dpop: true }] });

/** The provider's own answer to `req`, asked behind the front as the front forwards (Host kept: DPoP htu). */
function behind(req: FrontRequest): Promise<Record<string, unknown>> {
  const query = req.query.toString();
  return new Promise((resolve, reject) => {
    const ask = http.request(
      { host: '127.0.0.1', port: provider.port, method: req.method, path: `${req.path}${query ? `?${query}` : ''}`, headers: req.headers },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>));
        answer.on('error', reject);
      },
    );
    ask.on('error', reject);
    ask.end(req.body);
  });
}

describe('DPoP and the provider', () => {
  it('refuses a provider whose metadata lists no ES256 for DPoP: /readyz 503, the reason logged, no login', async () => {
    front.intercept(async (req) => {
      if (req.path !== '/.well-known/openid-configuration') return undefined;
      const metadata = await behind(req);
      delete metadata.dpop_signing_alg_values_supported;
      return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(metadata) };
    });
    const gw: TestGateway = await startTestGateway(dpopConfig(first.url), first, { waitForProvider: false });
    try {
      await eventually('a refused discovery', 10_000, () => gw.logs.some((l) => l.includes('dpop_signing_alg_values_supported')));
      expect((await fetch(`${gw.url}/readyz`)).status).toBe(503);
      expect((await new BrowserClient().get(`${gw.url}/auth/login`)).status).toBe(503);
    } finally {
      await gw.close();
    }
  });

  it('refuses a sign-in whose code exchange, sent with a proof, comes back as a bearer token', async () => {
    const config = dpopConfig(second.url);
    const gw = await startTestGateway(config, second);
    try {
      front.intercept(async (req) => {
        if (!isGrant(req, 'authorization_code')) return undefined;
        const answer = await behind(req);
        if (answer.token_type !== 'DPoP') throw new Error(`unexpected answer ${JSON.stringify(answer)}`);
        return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...answer, token_type: 'Bearer' }) };
      });
      const client = new BrowserClient();
      const result = await signIn(client, gw.url);
      expect(result.callbackUrl.startsWith(`${gw.url}/auth/callback?`)).toBe(true);
      expect(result.final.status).toBe(400);
      expect(client.cookies(gw.url)[config.derived.sessionCookieName]).toBeUndefined();
      expect(gw.logs.some((l) => l.includes('"event":"login_failed"'))).toBe(true);
    } finally {
      await gw.close();
    }
  });
});

describe('a provider that asks for a DPoP nonce again and again', () => {
  // Fails if, in src/oidc/errors.ts fromCallbackError, the use_dpop_nonce line goes: the
  // provider's fault was answered as the sign-in's, 400 invalid_request ("start again"); the
  // challenge form fails too if that line reads only a ResponseBodyError's `error`.
  it('at the code exchange: 503 provider_unavailable after the one retry, no session', async () => {
    const config = dpopConfig(third.url);
    const gw = await startTestGateway(config, third);
    try {
      let exchanges = 0;
      /** Every code exchange is answered by `asking(a fresh nonce)`: the provider wants one again and again. */
      const askForNonces = (asking: (nonce: string) => FrontAnswer) =>
        front.intercept((req) => {
          if (!isGrant(req, 'authorization_code')) return undefined;
          exchanges += 1;
          return asking(`nonce-${exchanges}-${'n'.repeat(16)}`);
        });

      askForNonces((nonce) => ({
        status: 400,
        headers: { 'content-type': 'application/json', 'dpop-nonce': nonce },
        body: JSON.stringify({ error: 'use_dpop_nonce', error_description: 'Authorization server requires nonce in DPoP proof' }),
      }));
      const client = new BrowserClient();
      const result = await signIn(client, gw.url);
      expect(result.final.status).toBe(503);
      expect(exchanges).toBe(2);
      expect(client.cookies(gw.url)[config.derived.sessionCookieName]).toBeUndefined();

      // The same asked in a WWW-Authenticate challenge, as RFC 9449 §8 allows too.
      askForNonces((nonce) => ({ status: 401, headers: { 'www-authenticate': 'DPoP error="use_dpop_nonce"', 'dpop-nonce': nonce } }));
      const again = await signIn(new BrowserClient(), gw.url);
      expect(again.final.status).toBe(503);
      expect(exchanges).toBe(4);
    } finally {
      await gw.close();
    }
  });
  // Fails if, in src/proxy/bearer.ts userAccessToken, a failed refresh is not remembered
  // (`failedRefreshes.failed(failing, err)` removed): each call of the expired session was one
  // refresh, two token requests with the nonce retry, at a provider that cannot be satisfied
  // (found by the DPoP red team: 10 calls, 20 requests).
  it('at a refresh: 502 token_refresh_failed, and a burst of calls makes one refresh (its nonce retry included)', async () => {
    const clock = createTestClock();
    const gw = await startTestGateway(dpopConfig(fourth.url), fourth, { clock });
    try {
      const client = new BrowserClient();
      await signIn(client, gw.url);
      let asked = 0;
      front.intercept((req) => {
        if (!isGrant(req, 'refresh_token')) return undefined;
        asked += 1;
        return {
          status: 400,
          headers: { 'content-type': 'application/json', 'dpop-nonce': `nonce-${asked}-${'n'.repeat(16)}` },
          body: JSON.stringify({ error: 'use_dpop_nonce' }),
        };
      });
      clock.advance(3600);
      for (let i = 0; i < 10; i++) expectErrorBody(await client.get(`${gw.url}/api/x`, { headers: { 'x-csrf': '1' } }), 'token_refresh_failed', 502);
      expect(asked).toBe(2);
      expect((await client.get(`${gw.url}/auth/user`, { headers: { 'x-csrf': '1' } })).status).toBe(200);
    } finally {
      await gw.close();
    }
  });
});

describe('DPoP with pushed authorization requests (RFC 9126)', () => {
  it('pushes dpop_jkt with the other parameters: the browser sees only request_uri, the token is bound to the session key', async () => {
    const api = 'https://api.par.example';
    const stack = await startStack({
      provider: { pushedAuthorizationRequests: 'required', resourceServers: { [api]: { scope: 'api:read' } }, defaultResource: api, scopes: { 'api:read': 'Read' } },
      config: {
        scopes: ['openid', 'offline_access', 'api:read'],
        extraAuthParams: { resource: api },
        oidc: { pushedAuthorizationRequests: 'always' },
        routes: [{ path: '/api', target: 'http://127.0.0.1:9', auth: 'user', dpop: true }],
      },
    });
    try {
      const client = new BrowserClient();
      const result = await signIn(client, stack.gateway.url);
      expect(result.authorizeUrl.searchParams.has('request_uri')).toBe(true);
      expect(result.authorizeUrl.searchParams.has('dpop_jkt')).toBe(false);
      const cookie = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
      const tokens = await tokensOfSession(stack.gateway, cookie);
      expect((decodeJwt(tokens?.accessToken ?? '').cnf as { jkt?: string } | undefined)?.jkt).toBe(jwkThumbprint(tokens!.dpopKey!));
    } finally {
      await stack.close();
    }
  });
});
