/**
 * JWT access tokens: what was issued (recorded as the provider signs them) and whether one is
 * still active.
 */
import { createLocalJWKSet, jwtVerify, type JWK } from 'jose';
import type { Env } from './env.js';

export interface JwtRecord {
  grantId: string | undefined;
  expiresAt: number;
}

export function recordJwt(records: Map<string, JwtRecord>, grantId: string | undefined, payload: Record<string, unknown>): void {
  const { jti, exp } = payload;
  if (typeof jti !== 'string' || typeof exp !== 'number') return;
  const now = Date.now();
  if (records.size > 1000) {
    for (const [key, record] of [...records]) if (record.expiresAt <= now) records.delete(key);
  }
  records.set(jti, { grantId, expiresAt: exp * 1000 });
}

export async function jwtAccessTokenActive(env: Env, token: string): Promise<boolean> {
  let jti: unknown;
  try {
    const { payload } = await jwtVerify(token, createLocalJWKSet(env.jwks as { keys: JWK[] }), {
      issuer: env.options.issuer,
      typ: 'at+jwt',
    });
    jti = payload.jti;
  } catch {
    return false;
  }
  const record = typeof jti === 'string' ? env.jwtRecords.get(jti) : undefined;
  if (!record || record.expiresAt <= Date.now()) return false;
  if (record.grantId === undefined) return true;
  return (await env.provider.Grant.find(record.grantId)) !== undefined;
}
