/**
 * The demo API's DPoP checks (RFC 9449 §7.1, §4.3, §8), with jose only, as a third-party
 * resource server would make them: the proof is a `dpop+jwt` signed by the public key in its own
 * header, for this method and URI (`htm`, `htu`), recent (`iat`), never seen before (`jti`),
 * for this very token (`ath`), and the token is bound to that key (`cnf.jkt`). With nonces on,
 * the proof must also carry one of the API's current nonces (`use_dpop_nonce` otherwise, with a
 * fresh one in DPoP-Nonce), rotated every `nonceLifetimeSeconds`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { calculateJwkThumbprint, EmbeddedJWK, jwtVerify, type JWTPayload } from 'jose';

export type DpopRefusal =
  | { error: 'invalid_dpop_proof' | 'invalid_token'; description: string }
  | { error: 'use_dpop_nonce'; description: string; nonce: string };

export interface DpopCheckInput {
  method: string;
  /** The URI the request was sent to, without query (the API's own origin and the path). */
  htu: string;
  proof: string | string[] | undefined;
  accessToken: string;
  claims: JWTPayload;
}

export interface DpopChecker {
  /** undefined when the proof holds; else why not. */
  check(input: DpopCheckInput): Promise<DpopRefusal | undefined>;
  /** The nonce to send with answers (RFC 9449 §8.2), when nonces are on. */
  currentNonce(): string | undefined;
}

export interface DpopCheckerOptions {
  requireNonce?: boolean;
  /** How far `iat` may be from now, in seconds; default 60. */
  iatWindowSeconds?: number;
  nonceLifetimeSeconds?: number;
}

const MAX_REMEMBERED_JTIS = 10_000;

export function createDpopChecker(options: DpopCheckerOptions = {}): DpopChecker {
  const window = options.iatWindowSeconds ?? 60;
  const lifetimeMs = (options.nonceLifetimeSeconds ?? 300) * 1000;
  // jti -> expiry (ms): a proof is accepted once within its iat window.
  const seen = new Map<string, number>();
  let nonces = { current: randomBytes(16).toString('base64url'), previous: '', rotatedAt: Date.now() };

  function nonceState() {
    if (Date.now() - nonces.rotatedAt >= lifetimeMs) {
      nonces = { current: randomBytes(16).toString('base64url'), previous: nonces.current, rotatedAt: Date.now() };
    }
    return nonces;
  }

  function remember(jti: string, now: number): boolean {
    const known = seen.get(jti);
    if (known !== undefined && known > now) return false;
    if (seen.size >= MAX_REMEMBERED_JTIS) {
      for (const [key, expiry] of seen) if (expiry <= now) seen.delete(key);
      if (seen.size >= MAX_REMEMBERED_JTIS) seen.delete(seen.keys().next().value as string);
    }
    seen.set(jti, now + 2 * window * 1000);
    return true;
  }

  return {
    currentNonce: () => (options.requireNonce ? nonceState().current : undefined),
    async check(input) {
      const invalid = (description: string): DpopRefusal => ({ error: 'invalid_dpop_proof', description });
      if (typeof input.proof !== 'string' || input.proof.length === 0 || input.proof.length > 8192) {
        return invalid('The request must carry exactly one DPoP proof.');
      }
      let payload: JWTPayload;
      let jwk: Parameters<typeof calculateJwkThumbprint>[0];
      try {
        const verified = await jwtVerify(input.proof, EmbeddedJWK, { typ: 'dpop+jwt', algorithms: ['ES256', 'EdDSA', 'PS256', 'RS256'] });
        payload = verified.payload;
        jwk = verified.protectedHeader.jwk as typeof jwk;
      } catch {
        return invalid('The DPoP proof is not a valid dpop+jwt signed by the key it names.');
      }
      if (payload.htm !== input.method) return invalid('The DPoP proof is for another method.');
      if (payload.htu !== input.htu) return invalid('The DPoP proof is for another URI.');
      const now = Date.now();
      if (typeof payload.iat !== 'number' || Math.abs(now / 1000 - payload.iat) > window) {
        return invalid('The DPoP proof is not recent.');
      }
      const ath = createHash('sha256').update(input.accessToken, 'ascii').digest('base64url');
      if (payload.ath !== ath) return invalid('The DPoP proof is for another access token.');
      const cnf = input.claims.cnf as { jkt?: unknown } | undefined;
      if (typeof cnf?.jkt !== 'string' || cnf.jkt !== (await calculateJwkThumbprint(jwk))) {
        return { error: 'invalid_token', description: 'The access token is not bound to the key of the DPoP proof.' };
      }
      if (options.requireNonce) {
        const state = nonceState();
        if (payload.nonce !== state.current && (state.previous === '' || payload.nonce !== state.previous)) {
          return { error: 'use_dpop_nonce', description: 'The DPoP proof must carry the API\'s current nonce.', nonce: state.current };
        }
      }
      if (typeof payload.jti !== 'string' || payload.jti.length === 0 || !remember(payload.jti, now)) {
        return invalid('The DPoP proof was used before.');
      }
      return undefined;
    },
  };
}
