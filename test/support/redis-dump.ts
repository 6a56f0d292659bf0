/**
 * The suite's one Redis dump, for leak scans and counts: every key under a pattern, read by
 * type. Two shapes of one read: a line per key (`<key> <content>`, the default), or every
 * value flat (hash field names included). The reading is in redis-server.ts (dumpWith).
 */
import { Redis } from 'ioredis';
import { dumpWith, type DumpOptions } from './redis-server.js';

export { dumpWith, scanKeys, type DumpOptions } from './redis-server.js';

/** The dump of the Redis at `url`, on a connection of its own. */
export async function dumpRedis(url: string, pattern: string, options: DumpOptions = {}): Promise<string[]> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    return await dumpWith(redis, pattern, options);
  } finally {
    redis.disconnect();
  }
}
