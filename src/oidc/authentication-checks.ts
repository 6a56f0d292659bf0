/**
 * OIDC Core §3.1.3.7 steps 12–13, as the gateway applies them: what the ID token says about the
 * authentication (`acr`, `auth_time`) is checked against what the authorization request asked
 * for, before any session exists. Pure: the clock is passed in.
 */
import { GatewayError } from '../errors.js';
import type { AuthenticationAsked } from './authorization-request.js';

/** The authentication a session records (and /auth/user shows). */
export interface Authentication {
  acr?: string;
  /** Epoch seconds (the ID token's `auth_time`). */
  authTime?: number;
}

/** `code` is what the log shows (oidc/errors.ts describeProviderError): no claim values. */
const refused = (code: string) =>
  new GatewayError('invalid_request', {
    cause: Object.assign(new Error(code), { code }),
    description: 'The sign-in did not meet the requested authentication level or freshness; start again.',
  });

/**
 * The ID token's `acr` and `auth_time` (when well-formed), after checking them against `asked`:
 * - acr values asked: `acr` must be one of them (the gateway asks them as essential);
 * - max_age asked: `auth_time` is then REQUIRED (Core §3.1.2.1) and must be no older than
 *   max_age, with the clock tolerance;
 * - asked or not, an `auth_time` in the future (beyond the tolerance) is refused: a provider's
 *   clock ahead of the ID token's own `iat`, or one writing milliseconds, would otherwise have a
 *   route's `stepUp.maxAgeSeconds` met for as long as that lasts (and /auth/user could not show
 *   it as a date).
 */
export function checkAuthentication(
  claims: Readonly<Record<string, unknown>>,
  asked: AuthenticationAsked | undefined,
  nowSeconds: number,
  toleranceSeconds: number,
): Authentication {
  const acr = typeof claims.acr === 'string' && claims.acr.length > 0 ? claims.acr : undefined;
  // A NumericDate may carry fractional seconds (RFC 7519 §2); whole seconds are what max_age counts.
  const authTime = typeof claims.auth_time === 'number' && Number.isFinite(claims.auth_time) && claims.auth_time > 0 ? Math.floor(claims.auth_time) : undefined;
  if (asked?.acrValues?.length && (acr === undefined || !asked.acrValues.includes(acr))) {
    throw refused('acr_not_requested');
  }
  if (authTime !== undefined && authTime > nowSeconds + toleranceSeconds) throw refused('auth_time_in_future');
  if (asked?.maxAge !== undefined) {
    if (authTime === undefined) throw refused('auth_time_missing');
    if (authTime + asked.maxAge + toleranceSeconds < nowSeconds) throw refused('auth_time_too_old');
  }
  return { ...(acr !== undefined ? { acr } : {}), ...(authTime !== undefined ? { authTime } : {}) };
}
