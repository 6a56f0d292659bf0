/**
 * DPoP keys and proofs (RFC 9449) with node:crypto only.
 *
 * Why here and not with jose in oidc/: a proof is a small ES256 JWS that the proxy signs on every
 * call to a DPoP route. node:crypto's synchronous `sign` with a prepared KeyObject costs one
 * ECDSA signature and no promise or thread-pool hop (WebCrypto's `subtle.sign`, which jose and
 * openid-client use, runs each signature as an async job). Token endpoint proofs are made by
 * openid-client itself (oidc/dpop.ts) from the same key.
 *
 * Pure except for the key generation, the random `jti` and the clock passed in.
 */
import { createHash, createPrivateKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

/** A P-256 private key as a JWK (kty, crv, x, y, d): what the session keeps, sealed. */
export interface DpopPrivateJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  d: string;
}

export interface DpopPublicJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
}

export interface ProofInput {
  /** HTTP method, upper case. */
  htm: string;
  /** The target URI without query and fragment (RFC 9449 §4.2). */
  htu: string;
  /** The access token the request carries (its SHA-256 becomes `ath`). */
  accessToken?: string;
  /** The server's latest DPoP-Nonce, when it gave one. */
  nonce?: string;
}

const b64u = (value: Buffer | string) => Buffer.from(value).toString('base64url');

export function generateDpopKey(): DpopPrivateJwk {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = privateKey.export({ format: 'jwk' });
  return { kty: 'EC', crv: 'P-256', x: String(jwk.x), y: String(jwk.y), d: String(jwk.d) };
}

export function publicJwk(key: DpopPrivateJwk | DpopPublicJwk): DpopPublicJwk {
  return { kty: 'EC', crv: 'P-256', x: key.x, y: key.y };
}

/** RFC 7638 thumbprint (SHA-256, base64url): the `dpop_jkt` and the token's `cnf.jkt`. */
export function jwkThumbprint(key: DpopPrivateJwk | DpopPublicJwk): string {
  // Required members only, in lexicographic order, no whitespace.
  const canonical = `{"crv":"${key.crv}","kty":"${key.kty}","x":"${key.x}","y":"${key.y}"}`;
  return createHash('sha256').update(canonical).digest('base64url');
}

/** RFC 9449 §4.2 `ath`: base64url(SHA-256(ASCII access token)). */
export function accessTokenHash(accessToken: string): string {
  return createHash('sha256').update(accessToken, 'ascii').digest('base64url');
}

/** A shape check for what comes out of a sealed value (never trusted blindly). */
export function isDpopPrivateJwk(value: unknown): value is DpopPrivateJwk {
  if (value === null || typeof value !== 'object') return false;
  const k = value as Record<string, unknown>;
  return k.kty === 'EC' && k.crv === 'P-256' && [k.x, k.y, k.d].every((v) => typeof v === 'string' && /^[A-Za-z0-9_-]{43}$/.test(v));
}

/** The claims of one proof (RFC 9449 §4.2); `jti` random, `iat` from the clock. */
export function proofClaims(input: ProofInput, nowSeconds: number, jti: string): Record<string, string | number> {
  return {
    jti,
    htm: input.htm,
    htu: input.htu,
    iat: nowSeconds,
    ...(input.accessToken !== undefined ? { ath: accessTokenHash(input.accessToken) } : {}),
    ...(input.nonce !== undefined ? { nonce: input.nonce } : {}),
  };
}

export interface ProofSigner {
  /** The key's thumbprint. */
  readonly jkt: string;
  proof(input: ProofInput, nowSeconds: number): string;
}

/**
 * Prepares a key once (the import is the expensive part after the signature): the protected
 * header is encoded once, each proof costs a JSON encode, a hash and one ECDSA signature.
 */
export function createProofSigner(key: DpopPrivateJwk): ProofSigner {
  const keyObject: KeyObject = createPrivateKey({ key: { ...key }, format: 'jwk' });
  const header = b64u(JSON.stringify({ typ: 'dpop+jwt', alg: 'ES256', jwk: publicJwk(key) }));
  return {
    jkt: jwkThumbprint(key),
    proof(input, nowSeconds) {
      const signingInput = `${header}.${b64u(JSON.stringify(proofClaims(input, nowSeconds, randomBytes(16).toString('base64url'))))}`;
      // JWS ES256 is the raw r||s form (RFC 7518 §3.4), not DER.
      const signature = sign('sha256', Buffer.from(signingInput), { key: keyObject, dsaEncoding: 'ieee-p1363' });
      return `${signingInput}.${signature.toString('base64url')}`;
    },
  };
}

/** A DPoP-Nonce header value, if it is one (RFC 9449 §8.1: NQCHAR, 1*). Anything else is ignored. */
export function parseNonce(value: string | string[] | undefined): string | undefined {
  if (typeof value !== 'string') return undefined;
  return value.length > 0 && value.length <= 1024 && /^[\x21\x23-\x5b\x5d-\x7e]+$/.test(value) ? value : undefined;
}
