/**
 * Shared DPoP nonces (src/redis/dpop-nonces.ts) on the in-memory Redis: one instance's nonce is
 * the others' after one read; a miss is remembered (no Redis command per call); an unchanged
 * nonce is not written again; a failing Redis never fails the caller.
 *
 * Mutation that fails it (checked by hand): in get(), drop the recheck window (always look up
 * when the entry has no nonce): the "costs nothing per call" test counts a GET per call.
 */
import { createDpopNonces } from '../../../src/redis/dpop-nonces.js';
import { createKeys } from '../../../src/redis/keys.js';
import { createMemoryRedis } from '../../../src/redis/memory.js';
import type { RedisClient } from '../../../src/redis/client.js';

// ioredis-mock instances share one data set: each test has its own key prefix.
let keys = createKeys('t0:');
let n = 0;
beforeEach(() => {
  keys = createKeys(`t${++n}:`);
});
const ORIGIN = 'https://api.example';

/** The in-memory Redis, with the commands this module uses counted. */
function counting(redis: RedisClient): { redis: RedisClient; calls: string[] } {
  const calls: string[] = [];
  const counted = {
    get: (key: string) => {
      calls.push('get');
      return redis.get(key);
    },
    set: (...args: Parameters<RedisClient['set']>) => {
      calls.push('set');
      return (redis.set as (...a: unknown[]) => Promise<unknown>)(...args);
    },
  };
  return { redis: counted as unknown as RedisClient, calls };
}

describe('shared DPoP nonces', () => {
  it("gives one instance's nonce to another after one read", async () => {
    const redis = createMemoryRedis();
    const a = createDpopNonces({ redis, keys });
    const b = createDpopNonces({ redis, keys });
    expect(await a.get(ORIGIN)).toBeUndefined();
    a.put(ORIGIN, 'n-1');
    await new Promise((resolve) => setImmediate(resolve));
    expect(await b.get(ORIGIN)).toBe('n-1');
  });

  it('costs nothing per call once looked up: a miss is remembered for the recheck window, a known nonce for good', async () => {
    let now = 0;
    const { redis, calls } = counting(createMemoryRedis());
    const nonces = createDpopNonces({ redis, keys, clock: () => now, recheckMs: 30_000 });
    for (let i = 0; i < 10; i++) await nonces.get(ORIGIN);
    expect(calls).toEqual(['get']);
    now += 30_000;
    await nonces.get(ORIGIN);
    expect(calls).toEqual(['get', 'get']);
    nonces.put(ORIGIN, 'n-1');
    nonces.put(ORIGIN, 'n-1');
    for (let i = 0; i < 10; i++) expect(await nonces.get(ORIGIN)).toBe('n-1');
    now += 3_600_000;
    expect(await nonces.get(ORIGIN)).toBe('n-1');
    expect(calls).toEqual(['get', 'get', 'set']);
  });

  it('writes a server that rotates its nonce on every answer at most once per interval', async () => {
    let now = 0;
    const { redis, calls } = counting(createMemoryRedis());
    const nonces = createDpopNonces({ redis, keys, clock: () => now, writeIntervalMs: 1000 });
    for (let i = 0; i < 50; i++) {
      nonces.put(ORIGIN, `n-${i}`);
      now += 10;
    }
    expect(await nonces.get(ORIGIN)).toBe('n-49');
    expect(calls.filter((c) => c === 'set')).toHaveLength(1);
    now += 1000;
    nonces.put(ORIGIN, 'n-50');
    expect(calls.filter((c) => c === 'set')).toHaveLength(2);
  });

  it('answers without a nonce, and reports, when Redis fails', async () => {
    const errors: unknown[] = [];
    const broken = {
      get: () => Promise.reject(new Error('down')),
      set: () => Promise.reject(new Error('down')),
    } as unknown as RedisClient;
    const nonces = createDpopNonces({ redis: broken, keys, onError: (err) => errors.push(err) });
    expect(await nonces.get(ORIGIN)).toBeUndefined();
    nonces.put(ORIGIN, 'n-1');
    await new Promise((resolve) => setImmediate(resolve));
    expect(await nonces.get(ORIGIN)).toBe('n-1');
    expect(errors).toHaveLength(2);
  });
});
