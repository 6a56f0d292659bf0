/**
 * How the demo API reads a request's credentials and a verified token: the Authorization
 * header's scheme and token, what a jose failure says about the token (401) as opposed to the
 * key source (503), and the token's scopes and string claims.
 */
import { errors as joseErrors, type JWTPayload } from 'jose';

/** Failures that say something about the token itself (as opposed to the key source). */
const TOKEN_ERRORS = [
  joseErrors.JWTExpired,
  joseErrors.JWTClaimValidationFailed,
  joseErrors.JWTInvalid,
  joseErrors.JWSInvalid,
  joseErrors.JWSSignatureVerificationFailed,
  joseErrors.JOSEAlgNotAllowed,
  joseErrors.JOSENotSupported,
  joseErrors.JWKSNoMatchingKey,
  joseErrors.JWKSMultipleMatchingKeys,
];

export const isTokenError = (err: unknown): boolean => TOKEN_ERRORS.some((type) => err instanceof type);

export type Credentials = { kind: 'none' } | { kind: 'malformed' } | { kind: 'bearer' | 'dpop'; token: string };

export function bearerCredentials(header: string | undefined): Credentials {
  if (header === undefined || header.trim() === '') return { kind: 'none' };
  const [scheme, ...rest] = header.trim().split(/ +/);
  // Another scheme (Basic...) carries no bearer credentials: same answer as none at all.
  const kind = scheme?.toLowerCase();
  if (kind !== 'bearer' && kind !== 'dpop') return { kind: 'none' };
  const token = rest.length === 1 ? rest[0] : undefined;
  // RFC 6750 §2.1 b64token syntax.
  if (!token || !/^[A-Za-z0-9\-._~+/]+=*$/.test(token)) return { kind: 'malformed' };
  return { kind, token };
}

export function describeTokenError(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return 'The access token has expired.';
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    switch (err.claim) {
      case 'iss':
        return 'The access token was issued by another issuer.';
      case 'aud':
        return 'The access token is meant for another audience.';
      case 'nbf':
      case 'iat':
        return 'The access token is not valid yet.';
      default:
        return `The access token's ${err.claim} claim is missing or invalid.`;
    }
  }
  if (err instanceof joseErrors.JOSEAlgNotAllowed || err instanceof joseErrors.JOSENotSupported) {
    return 'The access token is signed with an algorithm this API does not accept.';
  }
  if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys) {
    return 'The access token is signed with an unknown key.';
  }
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return 'The access token signature is invalid.';
  return 'The access token is malformed.';
}

/** `scope` (RFC 9068, space-separated) or, from some providers, `scp` as a list. */
export function tokenScopes(claims: JWTPayload): string[] {
  const raw = claims.scope ?? claims.scp;
  if (typeof raw === 'string') return splitScopes(raw);
  if (Array.isArray(raw)) return raw.filter((s): s is string => typeof s === 'string' && s !== '');
  return [];
}

export function splitScopes(value: string): string[] {
  return value.split(' ').filter((s) => s !== '');
}

export function stringClaim(claims: JWTPayload, name: string): string | undefined {
  const value = claims[name];
  return typeof value === 'string' ? value : undefined;
}
