/**
 * The DPoP side of a proxied call (RFC 9449 §7): for a session's key and access token, an
 * attachment that makes a fresh proof per upstream attempt (`htm`, `htu` of the canonical
 * upstream URL, `ath`, `jti`, `iat`, and the upstream's latest nonce) and takes in the nonces
 * the upstream sends back.
 *
 * The imported key (crypto/dpop.ts ProofSigner) is kept per opened token set in a WeakMap: the
 * vault hands out the same opened object while the stored value is unchanged, so a steady
 * stream of calls imports the key once and the entry goes with the token set, without a size
 * bound to tune. Nonces come from redis/dpop-nonces.ts (memory first, Redis once per origin).
 */
import type { IncomingMessage } from 'node:http';
import { createProofSigner, parseNonce, type DpopPrivateJwk, type ProofSigner } from '../crypto/dpop.js';
import type { DpopNonces } from '../redis/dpop-nonces.js';
import { joinTargetPath } from './target-path.js';
import { parseWwwAuthenticate } from './www-authenticate.js';

/** Makes DPoP proofs for one credential. */
export interface DpopAttachment {
  /** A fresh proof for this method and target URI (no query). */
  proof(htm: string, htu: string): string;
  /** A DPoP-Nonce the upstream sent: used by the next proofs, shared with the other instances. */
  nonce(value: string): void;
}

export interface DpopChallenge {
  /** The `error` parameter of the DPoP challenge, when there is one. */
  error?: string;
}

/**
 * The DPoP challenge in a WWW-Authenticate value (RFC 9449 §7.1), if any, read by the one
 * WWW-Authenticate reader (www-authenticate.ts): a `DPoP` inside another challenge's quoted
 * string (`Bearer realm="x, DPoP error=use_dpop_nonce"`) is no challenge. Only what the gateway
 * acts on is kept: the `error` parameter (`use_dpop_nonce`, `invalid_token`).
 */
export function dpopChallenge(header: string | readonly string[] | undefined): DpopChallenge | undefined {
  const challenge = parseWwwAuthenticate(header).find((c) => c.scheme === 'dpop');
  if (!challenge) return undefined;
  const error = challenge.params.error;
  return error !== undefined ? { error } : {};
}

/**
 * RFC 9449 §8.2: a DPoP-Nonce on any answer of a DPoP route (a WebSocket handshake's too) is
 * kept for the next proofs. True when the answer had one.
 */
export function keepNonce(attachment: DpopAttachment, answer: Pick<IncomingMessage, 'headers'>): boolean {
  const nonce = parseNonce(answer.headers['dpop-nonce']);
  if (nonce === undefined) return false;
  attachment.nonce(nonce);
  return true;
}

/**
 * RFC 9449 §7.1, §8.2: a DPoP route's answer may carry a new nonce (kept for the next proofs),
 * and a 401 `DPoP error="use_dpop_nonce"` is answered by one retry with a proof that carries it
 * (body-less requests only: a streamed body cannot be sent twice). True when it should retry.
 */
export function retryForNonce(
  proofs: { attachment: DpopAttachment; bodyless: boolean },
  answer: Pick<IncomingMessage, 'statusCode' | 'headers'>,
  alreadyRetried: boolean,
): boolean {
  if (!keepNonce(proofs.attachment, answer)) return false;
  if (answer.statusCode !== 401 || !proofs.bodyless || alreadyRetried) return false;
  return dpopChallenge(answer.headers['www-authenticate'])?.error === 'use_dpop_nonce';
}

/**
 * RFC 9449 §4.2 `htu`: the URL the upstream is called at, without query and fragment. The path
 * is joined exactly as the proxy (target-path.ts, httpxy's rule) joins the target's path and the forwarded
 * path with its query, then the query is cut: `/base` and `/` make `/base` (no slash added), `/base`
 * and `/?q=1` make `/base/`, `/base/` and `/x` make `/base/x`. A proof for any other URI is
 * refused by a server that checks htu.
 */
export function proofTarget(target: Pick<URL, 'origin' | 'pathname'>, forwarded: string): string {
  const joined = joinTargetPath(target.pathname, forwarded);
  const q = joined.indexOf('?');
  return `${target.origin}${q === -1 ? joined : joined.slice(0, q)}`;
}

/**
 * Upstream nonces are kept under their own name, never under the bare origin the provider's
 * nonces use (runtime.ts, oidc/dpop.ts): an upstream on the provider's origin (an API hosted
 * next to the IdP), lying or just different, must not set the nonce the token endpoint's proofs
 * carry, nor read it (RFC 9449 §8 and §9: each server has its own nonces).
 */
export const upstreamNonceKey = (origin: string) => `upstream ${origin}`;

export interface DpopProofs {
  attach(key: DpopPrivateJwk, accessToken: string, upstreamOrigin: string): Promise<DpopAttachment>;
}

export interface DpopProofsOptions {
  nonces: DpopNonces;
  clock: () => number;
}

export function createDpopProofs(options: DpopProofsOptions): DpopProofs {
  const { nonces, clock } = options;
  const signers = new WeakMap<DpopPrivateJwk, ProofSigner>();

  function signerFor(key: DpopPrivateJwk): ProofSigner {
    let signer = signers.get(key);
    if (!signer) {
      signer = createProofSigner(key);
      signers.set(key, signer);
    }
    return signer;
  }

  return {
    async attach(key, accessToken, upstreamOrigin) {
      const signer = signerFor(key);
      const server = upstreamNonceKey(upstreamOrigin);
      let nonce = await nonces.get(server);
      return {
        proof: (htm, htu) =>
          signer.proof({ htm, htu, accessToken, ...(nonce !== undefined ? { nonce } : {}) }, Math.floor(clock() / 1000)),
        nonce(value) {
          if (value === nonce) return;
          nonce = value;
          nonces.put(server, value);
        },
      };
    },
  };
}
