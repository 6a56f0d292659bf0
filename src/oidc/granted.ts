/**
 * What a token endpoint granted, read once into plain data: the lifetime bounded, the refresh
 * and ID tokens kept across a refresh that issues none, and the scopes the session holds.
 */
import type * as oidc from 'openid-client';

export interface GrantedTokens {
  accessToken: string;
  refreshToken?: string;
  idToken?: string;
  /** Epoch seconds. */
  expiresAt?: number;
  /** expires_in as read (whole seconds, capped): how long the token was issued for. */
  lifetime?: number;
  scope?: string;
}

/** Milliseconds since the epoch; injected so expiry can be tested without waiting. */
export type Clock = () => number;

/**
 * Longer than any access token is meant to live. A provider's `expires_in` is read as whole
 * seconds up to this: oauth4webapi accepts any non-negative number, and a lifetime of 1e300 made
 * every later use of it fail (Redis refuses such an EX: no client token was ever cached, each
 * call a new grant and a 503). Below one second (0 included) it is read as not stated (RFC 6749
 * §5.1 leaves the lifetime to the server then): a token that expires as it is issued was due
 * again at once, one grant or refresh per call (three per call, with the renewal rounds).
 */
export const MAX_TOKEN_LIFETIME_SECONDS = 366 * 24 * 3600;

/**
 * The longest ID token a sign-in takes (characters of its compact form). The session record
 * holds it and its visible claims, read whole on every call and cached per session: a profile
 * field a user may set (a 300 KB name) made a record of almost 1 MB, and 100 sessions of it
 * 300 MB of gateway memory. Real ID tokens stay far below (a few KiB; Entra ID's groups
 * overage keeps them under about 10 KiB).
 */
export const MAX_ID_TOKEN_LENGTH = 64 * 1024;

export function granted(
  response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
  clock: Clock,
  previous?: GrantedTokens,
): GrantedTokens {
  const answered = response.expiresIn();
  const expiresIn = answered === undefined || answered < 1 ? undefined : Math.min(Math.floor(answered), MAX_TOKEN_LIFETIME_SECONDS);
  // A refresh's ID token serves only as the logout's id_token_hint: one past the limit (a
  // profile field grown since sign-in) is not kept, the sign-in's goes on serving.
  const idToken = response.id_token !== undefined && response.id_token.length <= MAX_ID_TOKEN_LENGTH ? response.id_token : previous?.idToken;
  return {
    accessToken: response.access_token,
    // RFC 6749 §6: keep the old refresh token when the provider issues none.
    ...(response.refresh_token ?? previous?.refreshToken ? { refreshToken: response.refresh_token ?? previous?.refreshToken } : {}),
    ...(idToken ? { idToken } : {}),
    ...(expiresIn !== undefined ? { expiresAt: Math.floor(clock() / 1000) + expiresIn, lifetime: expiresIn } : {}),
    // `""` grants no scope (oidc-provider answers so for a resource whose scopes were all
    // declined); only an absent scope means the one asked for (RFC 6749 §5.1), or kept (§6).
    ...(response.scope !== undefined ? { scope: response.scope } : previous?.scope !== undefined ? { scope: previous.scope } : {}),
  };
}

/**
 * The scopes the session holds, which route scopes are checked against (SPEC §4): the token
 * response's `scope`, and only when it is absent the scopes requested (RFC 6749 §5.1: the
 * provider MUST list the scope when it differs from the request). `openid` is added back: the
 * verified ID token proves it. Nothing else is inferred: a provider that drops `email` (the
 * user unticked it) or, like oidc-provider with a resource indicator, lists only the access
 * token's resource scopes, is taken at its word.
 */
export function grantedScopes(requested: readonly string[], tokens: GrantedTokens): string[] {
  const scopes = new Set((tokens.scope ?? requested.join(' ')).split(' ').filter(Boolean));
  scopes.add('openid');
  return [...scopes];
}
