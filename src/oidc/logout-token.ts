/**
 * OpenID Connect Back-Channel Logout 1.0 §2.6: a logout token, parsed at the edge into a typed
 * value or refused with a fixed reason (never the token's own content).
 */
import { decodeJwt, decodeProtectedHeader, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { GatewayError } from '../errors.js';
import { isFetchFailure, keySetUnavailable } from './errors.js';

export const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

export interface LogoutToken {
  iss: string;
  jti: string;
  /** Epoch seconds until which the jti must be remembered. */
  rememberUntil: number;
  /** Its iat (epoch seconds, the provider's clock). */
  issuedAt: number;
  sid?: string;
  sub?: string;
}

export interface LogoutTokenChecks {
  issuer: string;
  clientId: string;
  algorithms: readonly string[];
  clockToleranceSeconds: number;
  /** How old (by iat) a logout token may be. */
  maxAgeSeconds: number;
  now: () => number;
}

/**
 * §2.4: `logout+jwt` is RECOMMENDED (with or without the `application/` prefix, RFC 7515
 * §4.1.9), and older providers send the generic `JWT` or no `typ` at all, which must keep
 * working. Any other explicit type (`at+jwt`, `id_token+jwt`, `dpop+jwt`...) names another kind
 * of token being replayed here (cross-JWT confusion, §4.1): refused. A `JWT`-typed ID token is
 * still refused by the claim checks: it has no back-channel logout event and carries a nonce.
 */
const ACCEPTED_TYP = new Set(['logout+jwt', 'application/logout+jwt', 'jwt', 'application/jwt']);

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A non-empty string; undefined when absent, null when present as anything else (an empty string too). */
const identifier = (value: unknown): string | undefined | null =>
  value === undefined ? undefined : typeof value === 'string' && value !== '' ? value : null;

/**
 * A logout token refused. `signed`: a logout token the provider signed (its signature verified
 * and it carries the back-channel logout event), refused for its claims: a clock skew, an
 * audience or claim mismatch. Only that kind is worth an operator's attention: the provider's
 * logouts do not take. Anything else is anybody's to send: a forged token, and any other token
 * the provider signed, which every user holds (an ID token: the logoutUrl's id_token_hint).
 */
export class LogoutTokenRefused extends GatewayError {
  constructor(
    readonly reason: string,
    readonly signed: boolean,
    cause?: unknown,
  ) {
    super('invalid_request', { description: `The logout_token was refused: ${reason}.`, cause });
  }
}

/** jose's errors raised once the signature has verified: the claims' checks. */
const CLAIM_ERRORS: ReadonlySet<string> = new Set(['ERR_JWT_CLAIM_VALIDATION_FAILED', 'ERR_JWT_EXPIRED']);

const refuse = (reason: string, cause?: unknown) => new LogoutTokenRefused(reason, false, cause);
const refuseSigned = (reason: string, cause?: unknown) => new LogoutTokenRefused(reason, true, cause);

/** §2.4: the event's value is a JSON object (null and arrays are not). */
const hasLogoutEvent = (payload: JWTPayload): boolean => isObject(payload.events) && isObject(payload.events[BACKCHANNEL_LOGOUT_EVENT]);

export async function verifyLogoutToken(token: string, jwks: JWTVerifyGetKey, checks: LogoutTokenChecks): Promise<LogoutToken> {
  let header;
  try {
    header = decodeProtectedHeader(token);
  } catch (err) {
    throw refuse('it is not a signed JWT', err);
  }
  // decodeProtectedHeader checks only that the header is a JSON object: typ may be anything.
  const typ: unknown = header.typ;
  if (typ !== undefined && (typeof typ !== 'string' || !ACCEPTED_TYP.has(typ.toLowerCase()))) throw refuse('its typ is not logout+jwt or JWT');
  let payload;
  try {
    ({ payload } = await jwtVerify(token, jwks, {
      issuer: checks.issuer,
      audience: checks.clientId,
      algorithms: [...checks.algorithms],
      clockTolerance: checks.clockToleranceSeconds,
      maxTokenAge: checks.maxAgeSeconds,
      requiredClaims: ['iat', 'jti'],
      currentDate: new Date(checks.now()),
    }));
  } catch (err) {
    // The provider's keys not to be had (a refetch for a rotated key failing, or its host not
    // reached: fetch's TypeError) is its outage, not a bad token: 503, which a provider
    // retries, where a 400 would drop the logout.
    if (isFetchFailure(err) || keySetUnavailable(err)) throw new GatewayError('provider_unavailable', { cause: err });
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && CLAIM_ERRORS.has(code)) {
      // Its signature verified: a logout token of the provider's, or another token it signed.
      if (hasLogoutEvent(decodeJwt(token))) throw refuseSigned('its claims (iss, aud, iat, exp) did not verify', err);
      throw refuse('it is no logout token (no back-channel logout event)', err);
    }
    throw refuse('its signature did not verify', err);
  }
  if (!hasLogoutEvent(payload)) throw refuse('it is no logout token (no back-channel logout event)');
  // From here the provider signed a logout token.
  if ('nonce' in payload) throw refuseSigned('it carries a nonce');
  // A sid or sub that is there but no string is malformed, not absent: read as absent, a sid of
  // 12345 beside a sub ended every session of the user instead of one provider session's.
  const sid = identifier(payload.sid);
  const sub = identifier(payload.sub);
  if (sid === null || sub === null) throw refuseSigned('its sid or sub is not a string');
  if (!sid && !sub) throw refuseSigned('it names neither sid nor sub');
  if (typeof payload.jti !== 'string' || payload.jti === '') throw refuseSigned('it has no jti');
  // The jti is remembered for as long as the token would be accepted: maxTokenAge bounds that by
  // iat whatever its exp says (an exp of 1e17 made Redis refuse the EX, a 503 after the
  // sessions were ended, and the jti went unrecorded).
  const rememberUntil = (payload.iat as number) + checks.maxAgeSeconds + checks.clockToleranceSeconds;
  return { iss: payload.iss as string, jti: payload.jti, rememberUntil, issuedAt: payload.iat as number, ...(sid ? { sid } : {}), ...(sub ? { sub } : {}) };
}
