/**
 * ID tokens of a test's own making, for a provider behind the tampering front
 * (provider-front.ts): the browser signs in at the real provider, but the code exchange is
 * answered with a forged token response and the JWKS with the test's own key set. Claims start
 * exactly as the provider would issue them (nonce taken from the authorization request), so a
 * correctly signed token is a working control and each refusal is about the one thing changed.
 */
import { randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { BrowserClient, type BrowserResponse } from './browser-client.js';
import { completeAtProvider, startLogin } from './drive-login.js';
import type { TestGateway } from './gateway.js';
import { isGrant, type FrontAnswer, type ProviderFront } from './provider-front.js';
import { dumpRedis } from './redis-dump.js';

export interface SigningKey {
  /** The private key. */
  key: CryptoKey;
  /** The public JWK as a JWKS would publish it (without `kid` when none was given). */
  jwk: JWK;
  /** The private JWK, e.g. to make it one of the provider's own signing keys. */
  privateJwk: JWK;
  alg: 'RS256' | 'ES256';
  kid: string | undefined;
}

export async function signingKey(alg: 'RS256' | 'ES256', kid?: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const meta = { alg, use: 'sig', ...(kid !== undefined ? { kid } : {}) };
  return { key: privateKey, jwk: { ...(await exportJWK(publicKey)), ...meta }, privateJwk: { ...(await exportJWK(privateKey)), ...meta }, alg, kid };
}

export const jwksOf = (...keys: SigningKey[]): { keys: JWK[] } => ({ keys: keys.map((k) => k.jwk) });

export type Claims = Record<string, unknown>;

/** Claims exactly as the provider would issue them for this authorization request. */
export function idTokenClaimsFor(authorizeUrl: URL, issuer: string, clientId = 'bff-test', sub = 'alice'): Claims {
  const now = Math.floor(Date.now() / 1000);
  return { iss: issuer, aud: clientId, sub, nonce: authorizeUrl.searchParams.get('nonce') as string, iat: now, exp: now + 300 };
}

/** A claim set to undefined is left out of the token. */
export function changed(claims: Claims, changes: Claims): Claims {
  return Object.fromEntries(Object.entries({ ...claims, ...changes }).filter(([, v]) => v !== undefined));
}

export type Forge = (claims: Claims) => Promise<string>;

/**
 * Signed by `k`, with its kid in the header unless `kid` says otherwise (null: no kid), typed
 * `JWT` unless `typ` says otherwise (null: no typ).
 */
export const signedWith =
  (k: SigningKey, header: { kid?: string | null; typ?: string | null } = {}): Forge =>
  (claims) => {
    const kid = header.kid === undefined ? k.kid : (header.kid ?? undefined);
    const typ = header.typ === undefined ? 'JWT' : (header.typ ?? undefined);
    return new SignJWT(claims)
      .setProtectedHeader({ alg: k.alg, ...(typ !== undefined ? { typ } : {}), ...(kid !== undefined ? { kid } : {}) })
      .sign(k.key);
  };

export const unsecured: Forge = async (claims) => {
  const part = (v: object) => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.`;
};

export const hs256With =
  (secret: string): Forge =>
  (claims) =>
    new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode(secret));

/** The token `forge` makes, with one bit of its signature flipped (header and claims intact). */
export const withBrokenSignature =
  (forge: Forge): Forge =>
  async (claims) => {
    const [header, payload, signature] = (await forge(claims)).split('.') as [string, string, string];
    const bytes = Buffer.from(signature, 'base64url');
    bytes[bytes.length >> 1] = (bytes[bytes.length >> 1] as number) ^ 0x01;
    return `${header}.${payload}.${bytes.toString('base64url')}`;
  };

export function jsonAnswer(body: unknown): FrontAnswer {
  return { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' }, body: JSON.stringify(body) };
}

/** A token endpoint answer carrying `idToken` and a fresh random access token. */
export function tokenAnswer(idToken: string, extra: Claims = {}): FrontAnswer {
  return jsonAnswer({
    access_token: randomBytes(24).toString('base64url'),
    token_type: 'Bearer',
    expires_in: 60,
    id_token: idToken,
    scope: 'openid profile email',
    ...extra,
  });
}

export interface ForgingRig {
  front: ProviderFront;
  gw: TestGateway;
  /** The path of the provider's jwks_uri at the front. */
  jwksPath: string;
}

export interface ForgedSignIn {
  /** The gateway's answer to the callback. */
  answer: BrowserResponse;
  /** The session cookie, when one was set. */
  cookie: string | undefined;
  /** Session records in Redis before and after the callback. */
  sessionsBefore: number;
  sessionsAfter: number;
  client: BrowserClient;
}

const sessionCount = async (gw: TestGateway) => (await dumpRedis(gw.config.redis.url as string, `${gw.config.redis.keyPrefix}sess:*`)).length;

/**
 * Signs in at the real provider; the code exchange is answered with the ID token `idTokenFor`
 * makes at that moment (so a test can rotate keys "just before signing"), and every JWKS fetch
 * with what `jwks()` says then. Returns the callback's answer and what Redis holds after.
 */
export async function signInWithForgedIdToken(
  rig: ForgingRig,
  idTokenFor: (authorizeUrl: URL) => Promise<string>,
  jwks: () => { keys: JWK[] },
): Promise<ForgedSignIn> {
  const client = new BrowserClient();
  const started = await startLogin(client, rig.gw.url);
  const callbackUrl = await completeAtProvider(client, started.authorizeUrl);
  rig.front.intercept(async (req) => {
    if (req.method === 'GET' && req.path === rig.jwksPath) return jsonAnswer(jwks());
    if (isGrant(req, 'authorization_code')) return tokenAnswer(await idTokenFor(started.authorizeUrl));
    return undefined;
  });
  try {
    const sessionsBefore = await sessionCount(rig.gw);
    const answer = await client.get(callbackUrl, { headers: { accept: 'application/json' } });
    const sessionsAfter = await sessionCount(rig.gw);
    return { answer, cookie: client.cookies(rig.gw.url)[rig.gw.config.derived.sessionCookieName], sessionsBefore, sessionsAfter, client };
  } finally {
    rig.front.intercept(undefined);
  }
}
