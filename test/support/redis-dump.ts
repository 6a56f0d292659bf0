import { Redis } from 'ioredis';

/** Every value under `pattern` as text (strings, hashes, sets, lists, zsets), for leak scans. */
export async function dumpRedis(url: string, pattern: string): Promise<string[]> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    const out: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
      cursor = next;
      for (const key of keys) {
        const type = await redis.type(key);
        if (type === 'string') out.push(`${key} ${(await redis.get(key)) ?? ''}`);
        else if (type === 'hash') out.push(`${key} ${JSON.stringify(await redis.hgetall(key))}`);
        else if (type === 'set') out.push(`${key} ${(await redis.smembers(key)).join(' ')}`);
        else if (type === 'list') out.push(`${key} ${(await redis.lrange(key, 0, -1)).join(' ')}`);
        else if (type === 'zset') out.push(`${key} ${(await redis.zrange(key, 0, -1)).join(' ')}`);
      }
    } while (cursor !== '0');
    return out;
  } finally {
    redis.disconnect();
  }
}
