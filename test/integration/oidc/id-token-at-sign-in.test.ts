/**
 * The ID token's signature and algorithm are checked at sign-in, through the real callback
 * (SPEC §3; OIDC Core §3.1.3.7; issue 14). Until now `verifyIdToken` was only called directly.
 *
 * A tampering front stands at the issuer: the browser signs in at the real provider, but the
 * token endpoint's answer is the test's own, carrying an ID token with exactly the right claims
 * (iss, aud, sub, nonce from the authorization request, iat, exp), and the provider's JWKS is
 * the test's own key set. A token signed by the published key passes (the control: the claims
 * are right), so each refusal below is about the signature or the algorithm alone.
 *
 * Mutation check: in src/oidc/flows.ts completeAuthorization, skip the `verifyIdToken(...)` call
 * (use `decodeJwt(response.id_token)` as the payload): the unknown-key and same-kid-other-key
 * cases create a session and fail. (openid-client refuses `none` and HS256 on its own, since the
 * client's id_token_signed_response_alg is RS256: those two cases guard that layer.)
 */
import { randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { BrowserClient } from '../../support/browser-client.js';
import { completeAtProvider, startLogin } from '../../support/drive-login.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { isGrant, startFrontedProvider, startProviderFront, type FrontAnswer, type ProviderFront } from '../../support/provider-front.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { dumpRedis } from '../../support/redis-dump.js';

const CLIENT_SECRET = 'bff-test-secret-0123456789abcdef';
let front: ProviderFront;
let provider: TestProvider;
let gw: TestGateway;
let jwksPath: string;
let published: { key: CryptoKey; jwk: JWK };
let stranger: { key: CryptoKey; jwk: JWK };

async function rsaKey(kid: string): Promise<{ key: CryptoKey; jwk: JWK }> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  return { key: privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

beforeAll(async () => {
  front = await startProviderFront();
  const reserved = await reserveServer();
  provider = await startFrontedProvider(front, { clients: [gatewayClient(reserved.url)] });
  gw = await startTestGateway(buildTestConfig({ issuer: front.url, publicUrl: reserved.url }), reserved);
  jwksPath = new URL(((await (await fetch(`${front.url}/.well-known/openid-configuration`)).json()) as { jwks_uri: string }).jwks_uri).pathname;
  published = await rsaKey('published-key');
  stranger = await rsaKey('stranger-key');
});

afterAll(async () => {
  await gw?.close();
  await provider?.close();
  await front?.close();
});

afterEach(() => front.intercept(undefined));

/** Claims exactly as the provider would issue them for this authorization request. */
function claimsFor(authorizeUrl: URL) {
  const now = Math.floor(Date.now() / 1000);
  return { iss: front.url, aud: 'bff-test', sub: 'alice', nonce: authorizeUrl.searchParams.get('nonce') as string, iat: now, exp: now + 300 };
}

type Forge = (claims: ReturnType<typeof claimsFor>) => Promise<string>;

const signed = (key: CryptoKey, header: { alg: string; kid?: string }): Forge => (claims) =>
  new SignJWT(claims).setProtectedHeader({ typ: 'JWT', ...header }).sign(key);

const unsecured: Forge = async (claims) => {
  const part = (v: object) => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.`;
};

const hs256WithClientSecret: Forge = (claims) =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode(CLIENT_SECRET));

/**
 * Signs in at the real provider; the code exchange is answered with `forge`'s ID token and the
 * JWKS with the published key only. Returns the callback's answer and what Redis holds after.
 */
async function signInWith(forge: Forge) {
  const client = new BrowserClient();
  const started = await startLogin(client, gw.url);
  const callbackUrl = await completeAtProvider(client, started.authorizeUrl);
  const idToken = await forge(claimsFor(started.authorizeUrl));
  front.intercept((req): FrontAnswer | undefined => {
    if (req.method === 'GET' && req.path === jwksPath) {
      return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keys: [published.jwk] }) };
    }
    if (isGrant(req, 'authorization_code')) {
      const body = { access_token: randomBytes(24).toString('base64url'), token_type: 'Bearer', expires_in: 60, id_token: idToken, scope: 'openid profile email' };
      return { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' }, body: JSON.stringify(body) };
    }
    return undefined;
  });
  const answer = await client.get(callbackUrl, { headers: { accept: 'application/json' } });
  const sessions = await dumpRedis(gw.config.redis.url as string, `${gw.config.redis.keyPrefix}sess:*`);
  return { answer, sessions, cookie: client.cookies(gw.url)[gw.config.derived.sessionCookieName] };
}

describe('the ID token at the callback', () => {
  it('signed by the published key, with the right claims: signs in (the control)', async () => {
    const { answer, sessions, cookie } = await signInWith(signed(published.key, { alg: 'RS256', kid: 'published-key' }));
    expect(answer.status).toBe(302);
    expect(cookie).toBeDefined();
    expect(sessions.length).toBeGreaterThanOrEqual(1);
  });

  it.each([
    ['signed by a key the provider never published (unknown kid)', () => signed(stranger.key, { alg: 'RS256', kid: 'stranger-key' })],
    ["signed by another key under the published key's kid", () => signed(stranger.key, { alg: 'RS256', kid: 'published-key' })],
    ['unsigned (alg none)', () => unsecured],
    ['signed with HS256 and the client secret', () => hs256WithClientSecret],
  ])('%s: refused with 400, no session created', async (_name, forge) => {
    const before = await dumpRedis(gw.config.redis.url as string, `${gw.config.redis.keyPrefix}sess:*`);
    const { answer, sessions, cookie } = await signInWith(forge());
    expect(answer.status).toBe(400);
    expect((answer.json() as { error: string }).error).toBe('invalid_request');
    expect(cookie).toBeUndefined();
    expect(sessions.length).toBe(before.length);
  });
});
