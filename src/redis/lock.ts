/**
 * A Redis lock: SET NX PX with a random token, released only by its holder (Lua compare and
 * delete). The TTL bounds how long a crashed holder can block others. Writes are compare-and-set
 * on a version, so a lock that lapses under a slow holder loses no update, but it lets another
 * process refresh with a refresh token the holder has already spent (invalid_grant: the user is
 * signed out): holders re-arm it with extend() while they work (session/refresh.ts,
 * session/unsaved-refreshes.ts).
 */
import { randomBytes } from 'node:crypto';
import type { RedisClient } from './client.js';

const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;
const EXTEND = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;

export interface Lock {
  /** Lets it go if still held; false when Redis could not be told (it then lapses with its TTL). */
  release(): Promise<boolean>;
  /** Re-arms the TTL it was taken with, if still held; false when it was lost (expired, taken). */
  extend(): Promise<boolean>;
}

export async function tryLock(redis: RedisClient, key: string, ttlMs: number): Promise<Lock | undefined> {
  const token = randomBytes(16).toString('base64url');
  let ok: string | null;
  try {
    ok = await redis.set(key, token, 'PX', ttlMs, 'NX');
  } catch (err) {
    // A SET that timed out may still run (a latency spike), leaving a lock that no one holds for
    // its whole TTL: every caller of the key waited on it, then failed. The release follows it on
    // the same connection, so it lands after it.
    redis.eval(RELEASE, 1, key, token).catch(() => undefined);
    throw err;
  }
  if (ok !== 'OK') return undefined;
  return {
    async release() {
      try {
        await redis.eval(RELEASE, 1, key, token);
        return true;
      } catch {
        // The TTL frees it anyway.
        return false;
      }
    },
    async extend() {
      try {
        return (await redis.eval(EXTEND, 1, key, token, ttlMs)) === 1;
      } catch {
        return false;
      }
    },
  };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
