import type { RedisClient } from './client.js';

/** True the first time `key` is seen within `ttlSeconds` (SET NX EX); false on a replay. */
export async function firstSighting(redis: RedisClient, key: string, ttlSeconds: number): Promise<boolean> {
  return (await redis.set(key, '1', 'EX', Math.max(1, Math.ceil(ttlSeconds)), 'NX')) === 'OK';
}

/** Whether `key` was already recorded by firstSighting (a read: records nothing). */
export async function sighted(redis: RedisClient, key: string): Promise<boolean> {
  return (await redis.exists(key)) === 1;
}
