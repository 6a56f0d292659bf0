/**
 * Fixed-window counter shared by every gateway process: INCR, with the window's expiry set on
 * the first hit, in one script so a crash between the two cannot leave a counter without TTL.
 * The window runs on Redis's clock, from its first hit: named by each process's clock, as it
 * was, processes a minute apart counted one address under different keys, each letting the
 * whole limit through (found by red team).
 */
import type { RedisClient } from './client.js';
import { GatewayError } from '../errors.js';
import { digest, type Keys } from './keys.js';
import { clientBucket, networkBucket } from '../config/cidr.js';

const HIT = `
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}`;

/** Counts one hit in `key`'s window; returns the count so far and the window's time left (ms). */
async function hitWindow(redis: RedisClient, key: string, windowSeconds: number): Promise<{ count: number; remainingMs: number }> {
  const [count, remainingMs] = (await redis.eval(HIT, 1, key, String(windowSeconds * 1000))) as [number, number];
  return { count: Number(count), remainingMs: Number(remainingMs) };
}

export interface LoginLimiter {
  /**
   * Counts one login start from `address` (an IPv6 one by its /64); throws 429 rate_limited past
   * the limit. Returns how many its network (networkBucket) started within the current window of
   * `heldSeconds` (a login transaction's life): what it may hold of the shared capacity.
   */
  hit(address: string): Promise<number>;
}

export function createLoginLimiter(redis: RedisClient, keys: Keys, perMinute: number, heldSeconds: number): LoginLimiter {
  return {
    async hit(address) {
      const { count, remainingMs } = await hitWindow(redis, keys.loginRate(digest(clientBucket(address))), 60);
      if (count > perMinute) {
        throw new GatewayError('rate_limited', { headers: { 'Retry-After': String(Math.max(1, Math.ceil(remainingMs / 1000))) } });
      }
      return (await hitWindow(redis, keys.loginRate(digest(`held ${networkBucket(address)}`)), heldSeconds)).count;
    },
  };
}
