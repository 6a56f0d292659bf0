/**
 * OpenID Connect Back-Channel Logout 1.0 §2.6: a logout token, parsed at the edge into a typed
 * value or refused with a fixed reason (never the token's own content).
 */
import { decodeProtectedHeader, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { GatewayError } from '../errors.js';

export const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

export interface LogoutToken {
  iss: string;
  jti: string;
  /** Epoch seconds until which the jti must be remembered. */
  rememberUntil: number;
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

const refuse = (reason: string, cause?: unknown) =>
  new GatewayError('invalid_request', { description: `The logout_token was refused: ${reason}.`, cause });

export async function verifyLogoutToken(token: string, jwks: JWTVerifyGetKey, checks: LogoutTokenChecks): Promise<LogoutToken> {
  let header;
  try {
    header = decodeProtectedHeader(token);
  } catch (err) {
    throw refuse('it is not a signed JWT', err);
  }
  // §2.4: "logout+jwt" is RECOMMENDED; anything else (e.g. an ID token's "JWT") is another kind
  // of token being replayed here (cross-JWT confusion, §4.1).
  if (header.typ !== undefined && header.typ.toLowerCase() !== 'logout+jwt' && header.typ.toLowerCase() !== 'application/logout+jwt') {
    throw refuse('its typ is not logout+jwt');
  }
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
    throw refuse('its signature or claims (iss, aud, iat, exp) did not verify', err);
  }
  const events = payload.events;
  if (
    events === null ||
    typeof events !== 'object' ||
    Array.isArray(events) ||
    typeof (events as Record<string, unknown>)[BACKCHANNEL_LOGOUT_EVENT] !== 'object'
  ) {
    throw refuse('it has no back-channel logout event');
  }
  if ('nonce' in payload) throw refuse('it carries a nonce');
  const sid = typeof payload.sid === 'string' && payload.sid !== '' ? payload.sid : undefined;
  const sub = typeof payload.sub === 'string' && payload.sub !== '' ? payload.sub : undefined;
  if (!sid && !sub) throw refuse('it names neither sid nor sub');
  if (typeof payload.jti !== 'string' || payload.jti === '') throw refuse('it has no jti');
  const nowSeconds = Math.floor(checks.now() / 1000);
  const rememberUntil = Math.max(payload.exp ?? 0, (payload.iat ?? nowSeconds) + checks.maxAgeSeconds) + checks.clockToleranceSeconds;
  return { iss: payload.iss as string, jti: payload.jti, rememberUntil, ...(sid ? { sid } : {}), ...(sub ? { sub } : {}) };
}
