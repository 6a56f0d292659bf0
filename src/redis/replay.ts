import type { RedisClient } from './client.js';

/** Records `key` (a token's jti, claimed with redis/lock.ts tryLock) as used, for `ttlSeconds` from now. */
export async function remember(redis: RedisClient, key: string, ttlSeconds: number): Promise<void> {
  await redis.set(key, '1', 'EX', Math.max(1, Math.ceil(ttlSeconds)));
}
