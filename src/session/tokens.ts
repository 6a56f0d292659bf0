/** The token set kept (sealed) in a session, and pure checks on it. The clock is passed in. */
import { isDpopPrivateJwk, type DpopPrivateJwk } from '../crypto/dpop.js';

/**
 * When a token expires and, when the provider said, how long it was issued for (expires_in, in
 * seconds): what its renewal is judged on.
 */
export interface Expiring {
  /** Epoch seconds. */
  expiresAt?: number;
  lifetime?: number;
}

export interface ResourceToken extends Expiring {
  accessToken: string;
  scope?: string;
  /**
   * Exchanged tokens only: the exchange request it answered (proxy/token-exchange.ts
   * exchangeRequestKey), so that a route whose tokenExchange changed never sends a token
   * issued for its old audience or scope.
   */
  exchangedFor?: string;
}

export interface TokenSet extends Expiring {
  accessToken: string;
  refreshToken?: string;
  idToken?: string;
  // expiresAt is absent when the provider gave no expires_in.
  scope?: string;
  /** RFC 8707 audience-restricted access tokens, by resource URI. */
  resources?: Record<string, ResourceToken>;
  /** RFC 8693 exchanged access tokens, by route path (proxy/token-exchange.ts). */
  exchanged?: Record<string, ResourceToken>;
  /**
   * RFC 9449: the session's DPoP private key, sealed with the tokens it binds (never in the
   * browser). Every token set of the session carries it on, refreshes included.
   */
  dpopKey?: DpopPrivateJwk;
}

/** Access tokens without expires_in are treated as living this long (RFC 6749 §5.1 leaves it open). */
export const DEFAULT_TOKEN_LIFETIME_SECONDS = 300;

/**
 * A token's expiry as the provider stated it, or DEFAULT_TOKEN_LIFETIME_SECONDS from `nowSeconds`
 * when it did not: for tokens that cannot live for the rest of the session (exchanged and client
 * tokens, which are cheap to get again).
 */
export function lifeOf(token: Expiring, nowSeconds: number): { expiresAt: number; lifetime?: number } {
  if (token.expiresAt === undefined) return { expiresAt: nowSeconds + DEFAULT_TOKEN_LIFETIME_SECONDS, lifetime: DEFAULT_TOKEN_LIFETIME_SECONDS };
  return token.lifetime === undefined ? { expiresAt: token.expiresAt } : { expiresAt: token.expiresAt, lifetime: token.lifetime };
}

/**
 * How long before it expires a token is renewed: `skewSeconds`, but at most half the lifetime
 * the provider issued it for. A token issued for no longer than the skew (a 30 s token, a 60 s
 * skew) serves its first half; it was due from the start, a renewal on every call.
 */
export function renewalMargin(token: Expiring, skewSeconds: number): number {
  const half = token.lifetime === undefined ? skewSeconds : token.lifetime / 2;
  return half < skewSeconds ? half : skewSeconds;
}

/** Whether `token` has expired at `nowSeconds` (never, when its expiry is not known). */
export function hasExpired(token: Expiring, nowSeconds: number): boolean {
  return token.expiresAt !== undefined && token.expiresAt <= nowSeconds;
}

/** Whether `token` is due for renewal at `nowSeconds` (never, when its expiry is not known). */
export function expiresWithin(token: Expiring, skewSeconds: number, nowSeconds: number): boolean {
  return token.expiresAt !== undefined && token.expiresAt - renewalMargin(token, skewSeconds) <= nowSeconds;
}

export function nowSeconds(clock: () => number = Date.now): number {
  return Math.floor(clock() / 1000);
}

/** A token set with the version it was read at; writes are compare-and-set on `version`. */
export interface VersionedTokens {
  version: number;
  tokens: TokenSet | undefined;
}

export function parseTokenSet(json: string): TokenSet | undefined {
  try {
    const value: unknown = JSON.parse(json);
    if (value === null || typeof value !== 'object') return undefined;
    const t = value as Partial<TokenSet>;
    if (typeof t.accessToken !== 'string') return undefined;
    // A key that is not a P-256 private JWK would throw deep in a proof (a 500): without it the
    // session reads as unbound, and a DPoP route answers login_required.
    if (t.dpopKey !== undefined && !isDpopPrivateJwk(t.dpopKey)) delete t.dpopKey;
    return t as TokenSet;
  } catch {
    return undefined;
  }
}
