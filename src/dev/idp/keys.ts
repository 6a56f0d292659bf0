/**
 * Signing keys: one fresh RS256 key unless the caller supplies its own.
 */
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from 'jose';

const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const;

async function generateSigningKey(): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, kid: await calculateJwkThumbprint(jwk), alg: 'RS256', use: 'sig' };
}

function publicPart(jwk: JWK): JWK {
  const copy: Record<string, unknown> = { ...jwk };
  for (const member of PRIVATE_JWK_MEMBERS) delete copy[member];
  return copy as JWK;
}

export async function signingKeys(supplied: { keys: object[] } | undefined): Promise<{ privateJwks: { keys: JWK[] }; jwks: { keys: JWK[] } }> {
  const keys = supplied ? (supplied.keys as JWK[]) : [await generateSigningKey()];
  return { privateJwks: { keys }, jwks: { keys: keys.map(publicPart) } };
}
