/** What a signed-in session holds besides its (sealed) tokens. Plain data, JSON-safe. */
export interface AuthData {
  /** Opaque public handle for /auth/sessions; unrelated to the cookie value. */
  handle: string;
  sub: string;
  iss: string;
  /** The provider's session ID from the ID token, for back-channel logout. */
  sid?: string;
  /** A subset of the ID token claims the SPA may see. */
  claims: Record<string, unknown>;
  scopes: string[];
  /** Epoch milliseconds of sign-in (the absolute timeout counts from here). */
  createdAt: number;
  /**
   * Epoch milliseconds the session ends at, as `session.absoluteTimeoutSeconds` stood at sign-in
   * (sessionEndsAt); absent in records before 0.6.6.
   */
  endsAt?: number;
  userAgent?: string;
  /** The ID token's `acr` at sign-in (RFC 9470 step-up is judged on it); absent in 0.4.0 records. */
  acr?: string;
  /** The ID token's `auth_time`, epoch seconds; absent in 0.4.0 records. */
  authTime?: number;
}

/** What a session's absolute end is judged on (sessionEndsAt). */
export type SignedInAt = Pick<AuthData, 'createdAt' | 'endsAt'>;

/**
 * When a session is over: its sign-in's own end, or sooner if the absolute timeout was shortened
 * since. Never later: a timeout lengthened since sign-in does not stretch the session past the
 * cookie's lifetime and its index entries (written for the old one), where a copied cookie
 * lived on, missing from the sessions list and untouched by a back-channel logout.
 */
export function sessionEndsAt(auth: SignedInAt, absoluteTimeoutSeconds: number): number {
  const configured = auth.createdAt + absoluteTimeoutSeconds * 1000;
  return auth.endsAt !== undefined && auth.endsAt < configured ? auth.endsAt : configured;
}

/** Sealed token set plus its version, as stored. `sealed` is '' once the tokens are dropped. */
export interface SealedTokens {
  v: number;
  sealed: string;
}

/**
 * Claims never shown to the SPA: they are either protocol plumbing or could be replayed
 * (at_hash, c_hash, nonce).
 */
const HIDDEN_CLAIMS = new Set(['aud', 'azp', 'at_hash', 'c_hash', 's_hash', 'nonce', 'sid', 'jti', 'exp', 'iat', 'nbf', 'auth_time', 'acr', 'amr']);

export function visibleClaims(claims: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(claims).filter(([k]) => !HIDDEN_CLAIMS.has(k)));
}
