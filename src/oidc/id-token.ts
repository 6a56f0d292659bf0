/**
 * ID token signature and claims, checked with jose against the provider's JWKS: an allow-listed
 * asymmetric `alg` (never `none`, never HS*), `iss`, `aud`, `exp`, and `iat` not in the future
 * beyond the tolerance (openid-client does not check the latter). openid-client has already
 * checked `nonce`, `azp` and `sub` at the code exchange.
 */
import { jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';

export interface IdTokenChecks {
  issuer: string;
  clientId: string;
  algorithms: readonly string[];
  clockToleranceSeconds: number;
}

export async function verifyIdToken(idToken: string, jwks: JWTVerifyGetKey, checks: IdTokenChecks): Promise<JWTPayload> {
  const { payload } = await jwtVerify(idToken, jwks, {
    issuer: checks.issuer,
    audience: checks.clientId,
    algorithms: [...checks.algorithms],
    clockTolerance: checks.clockToleranceSeconds,
    requiredClaims: ['iat', 'exp', 'sub'],
  });
  return payload;
}
