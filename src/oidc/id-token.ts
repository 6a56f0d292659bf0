/**
 * ID token signature and claims, checked with jose against the provider's JWKS: an allow-listed
 * asymmetric `alg` (never `none`, never HS*), `iss`, `exp`, `iat` not in the future beyond the
 * tolerance (openid-client does not check it), and the audience: the client alone, and an
 * `azp`, when present, naming the client (openid-client checks `azp` only beside several
 * audiences). openid-client has already checked `nonce` and `sub` at the code exchange.
 */
import { errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { GatewayError } from '../errors.js';

export interface IdTokenChecks {
  issuer: string;
  clientId: string;
  algorithms: readonly string[];
  clockToleranceSeconds: number;
  /** Milliseconds since the epoch. */
  now?: () => number;
}

/**
 * An ID token's `typ`, when present: the generic JWT types (OIDC Core defines none of its own).
 * Any other type names another kind of token signed by the same key (an `at+jwt` access token,
 * a `logout+jwt`) presented as an ID token: refused (RFC 8725 §3.11), whatever its claims.
 */
const ID_TOKEN_TYP: ReadonlySet<string> = new Set(['jwt', 'application/jwt']);

/** A claim check failed, as jose reports its own (the log names the claim, never its value). */
const claimRefused = (claim: string, message: string) => new joseErrors.JWTClaimValidationFailed(message, {}, claim, 'check_failed');

export async function verifyIdToken(idToken: string, jwks: JWTVerifyGetKey, checks: IdTokenChecks): Promise<JWTPayload> {
  const { payload, protectedHeader } = await jwtVerify(idToken, jwks, {
    issuer: checks.issuer,
    audience: checks.clientId,
    algorithms: [...checks.algorithms],
    clockTolerance: checks.clockToleranceSeconds,
    requiredClaims: ['iat', 'exp', 'sub'],
    ...(checks.now ? { currentDate: new Date(checks.now()) } : {}),
  });
  const typ: unknown = protectedHeader.typ;
  if (typ !== undefined && (typeof typ !== 'string' || !ID_TOKEN_TYP.has(typ.toLowerCase()))) {
    // A GatewayError, so that the login_failed line says why (an operator whose provider types
    // its ID tokens in its own way can tell).
    throw new GatewayError('invalid_request', { description: 'The ID token is typed as another kind of token (its typ is neither JWT nor absent).' });
  }
  // OIDC Core §3.1.3.7 step 3: refused when it "contains additional audiences not trusted by the
  // Client", and the gateway trusts none; jose checks only that the client is among them.
  const { aud, azp } = payload;
  if (Array.isArray(aud) ? aud.length !== 1 || aud[0] !== checks.clientId : aud !== checks.clientId) {
    throw claimRefused('aud', 'the ID token names an audience other than this client');
  }
  // OIDC Core §2: sub is the user, a locally unique identifier of 255 ASCII characters at most.
  // openid-client and jose check only that it is a string: "" made every such user one identity.
  if (typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.sub.length > 255) {
    throw claimRefused('sub', 'the ID token names no usable subject (1 to 255 characters)');
  }
  // Step 5: an azp names the party the token was issued to, which must be this client.
  if (azp !== undefined && azp !== checks.clientId) throw claimRefused('azp', 'the ID token was issued to another client (azp)');
  // jose checks iat only together with maxTokenAge: an ID token "issued" in the future is
  // refused here (OIDC Core §3.1.3.7 step 10).
  const nowSeconds = Math.floor((checks.now?.() ?? Date.now()) / 1000);
  if (typeof payload.iat !== 'number' || payload.iat > nowSeconds + checks.clockToleranceSeconds) {
    throw new Error('ID token iat is in the future');
  }
  return payload;
}
