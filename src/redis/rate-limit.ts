/**
 * Fixed-window counter shared by every gateway process: INCR, with the window's expiry set on
 * the first hit, in one script so a crash between the two cannot leave a counter without TTL.
 */
import type { RedisClient } from './client.js';
import { GatewayError } from '../errors.js';
import { digest, type Keys } from './keys.js';
import { clientBucket, networkBucket } from '../config/cidr.js';

const HIT = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n`;

export async function hitWindow(redis: RedisClient, key: string, windowSeconds: number): Promise<number> {
  return Number(await redis.eval(HIT, 1, key, String(windowSeconds)));
}

export interface LoginLimiter {
  /**
   * Counts one login start from `address` (an IPv6 one by its /64); throws 429 rate_limited past
   * the limit. Returns how many its network (networkBucket) started within the current window of
   * `heldSeconds` (a login transaction's life): what it may hold of the shared capacity.
   */
  hit(address: string): Promise<number>;
}

export function createLoginLimiter(redis: RedisClient, keys: Keys, perMinute: number, heldSeconds: number, clock: () => number = Date.now): LoginLimiter {
  return {
    async hit(address) {
      const now = clock();
      const minute = Math.floor(now / 60_000);
      const count = await hitWindow(redis, keys.loginRate(digest(clientBucket(address)), minute), 60);
      if (count > perMinute) {
        const retryAfter = Math.max(1, Math.ceil(((minute + 1) * 60_000 - now) / 1000));
        throw new GatewayError('rate_limited', { headers: { 'Retry-After': String(retryAfter) } });
      }
      const window = Math.floor(now / (heldSeconds * 1000));
      return hitWindow(redis, keys.loginRate(digest(`held ${networkBucket(address)}`), window), heldSeconds);
    },
  };
}
