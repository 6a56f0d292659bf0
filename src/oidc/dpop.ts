/**
 * DPoP at the token endpoint (RFC 9449 §5): the session's key as an openid-client DPoP handle,
 * primed with the provider's latest nonce, which every instance shares (redis/dpop-nonces.ts).
 * openid-client adds the proof to code exchange and refresh requests (a token exchange carries
 * none: its subject token is sent as a plain token, docs/dpop-and-token-exchange.md) and retries
 * once on `use_dpop_nonce` by itself; the nonce the provider sends back is recorded for the
 * other instances by the fetch hook that discovery installs (client.ts, `onDpopNonce`).
 */
import { createPrivateKey, createPublicKey } from 'node:crypto';
import * as oidc from 'openid-client';
import { publicJwk, type DpopPrivateJwk } from '../crypto/dpop.js';
import { GatewayError } from '../errors.js';
import type { ProviderState } from './client.js';

/** Where the latest nonce of a server is kept (redis/dpop-nonces.ts, injected). */
export interface NonceSource {
  get(origin: string): Promise<string | undefined>;
}

/** The DPoP key of a session and the shared nonces: what a token request needs for its proof. */
export interface TokenDpop {
  key: DpopPrivateJwk;
  nonces: NonceSource;
}

/** Is ES256 (the only algorithm the gateway's keys use) accepted by this provider? */
export function providerAcceptsDpop(metadata: Readonly<oidc.ServerMetadata>): boolean {
  const algs = metadata.dpop_signing_alg_values_supported;
  return Array.isArray(algs) && algs.includes('ES256');
}

export async function tokenEndpointHandle(provider: ProviderState, dpop: TokenDpop): Promise<oidc.DPoPHandle> {
  const keyPair: oidc.CryptoKeyPair = {
    privateKey: createPrivateKey({ key: { ...dpop.key }, format: 'jwk' }).toCryptoKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign']),
    publicKey: createPublicKey({ key: { ...publicJwk(dpop.key) }, format: 'jwk' }).toCryptoKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['verify']),
  };
  const endpoint = provider.metadata.token_endpoint;
  const shared = endpoint ? await dpop.nonces.get(new URL(endpoint).origin) : undefined;
  // The shared nonce goes into a proof the handle would send without one; after a
  // use_dpop_nonce answer the handle's own (newer) nonce is already in the payload.
  return oidc.getDPoPHandle(provider.configuration, keyPair, {
    [oidc.modifyAssertion]: (_header, payload) => {
      if (shared !== undefined && payload.nonce === undefined) payload.nonce = shared;
    },
  });
}

/**
 * RFC 9449 §5: a token issued in answer to a proof must be DPoP-bound (`token_type: DPoP`). A
 * provider that ignores the proof and issues a bearer token is refused rather than silently
 * downgraded: the route was configured for sender-constrained tokens.
 */
export function requireBound(response: { token_type: string }, code: TokenTypeRefusal): void {
  requireTokenType(response, 'dpop', code, 'The provider did not issue a DPoP-bound token.');
}

type TokenTypeRefusal = 'invalid_request' | 'token_refresh_failed' | 'login_required';

/**
 * The other way round: a session without a DPoP key can only send bearer tokens. A DPoP-bound
 * token (issued without a proof: RFC 9449 §5 forbids it) sent as `Bearer` fails at every API,
 * so it is refused where it is issued, as requireBound refuses a bearer token.
 */
export function requireBearer(response: { token_type: string }, code: TokenTypeRefusal, description = 'The provider did not issue a bearer token.'): void {
  requireTokenType(response, 'bearer', code, description);
}

/** oauth4webapi has checked that token_type is there and lowercased it (bearer or dpop). */
function requireTokenType(response: { token_type: string }, expected: 'bearer' | 'dpop', code: TokenTypeRefusal, description: string): void {
  if (response.token_type !== expected) throw new GatewayError(code, { description });
}
