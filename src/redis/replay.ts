import type { RedisClient } from './client.js';

/** True the first time `key` is seen within `ttlSeconds` (SET NX EX); false on a replay. */
export async function firstSighting(redis: RedisClient, key: string, ttlSeconds: number): Promise<boolean> {
  return (await redis.set(key, '1', 'EX', Math.max(1, Math.ceil(ttlSeconds)), 'NX')) === 'OK';
}

/** Keeps `key`, recorded by firstSighting, for `ttlSeconds` from now. */
export async function remember(redis: RedisClient, key: string, ttlSeconds: number): Promise<void> {
  await redis.set(key, '1', 'EX', Math.max(1, Math.ceil(ttlSeconds)));
}
