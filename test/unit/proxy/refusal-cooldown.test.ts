/**
 * The refusal cooldown's claim rule, on the in-process Redis emulation the demo uses (it runs
 * the same Lua): the first refused token claims the key, callers refused that same token may
 * join its renewal, any other token is refused until the interval ends.
 */
import { createKeys } from '../../../src/redis/keys.js';
import { createMemoryRedis } from '../../../src/redis/memory.js';
import { createRefusalCooldown, REFUSAL_COOLDOWN_MS } from '../../../src/proxy/refusal-cooldown.js';
import type { RedisClient } from '../../../src/redis/client.js';

let redis: RedisClient;
const keys = createKeys('cooldown-test:');

beforeEach(async () => {
  redis = createMemoryRedis();
  await redis.flushall();
});

afterEach(() => {
  redis.disconnect();
});

describe('refusal cooldown', () => {
  it('lets the first refused client token and callers refused the same one through, not the next token', async () => {
    const cooldown = createRefusalCooldown({ redis, keys });
    expect(await cooldown.clientToken('k1', 'token-a')).toBe(true);
    expect(await cooldown.clientToken('k1', 'token-a')).toBe(true);
    expect(await cooldown.clientToken('k1', 'token-b')).toBe(false);
    // Another cache key has its own cooldown.
    expect(await cooldown.clientToken('k2', 'token-b')).toBe(true);
  });

  it('claims per session and resource, by token set version', async () => {
    const cooldown = createRefusalCooldown({ redis, keys });
    expect(await cooldown.session('s1', undefined, 4)).toBe(true);
    expect(await cooldown.session('s1', undefined, 4)).toBe(true);
    expect(await cooldown.session('s1', undefined, 5)).toBe(false);
    expect(await cooldown.session('s1', 'https://inventory.example', 5)).toBe(true);
    expect(await cooldown.session('s2', undefined, 5)).toBe(true);
  });

  it('is shared by every instance using the same Redis', async () => {
    const one = createRefusalCooldown({ redis, keys });
    const two = createRefusalCooldown({ redis, keys });
    expect(await one.clientToken('k', 'token-a')).toBe(true);
    expect(await two.clientToken('k', 'token-a')).toBe(true);
    expect(await two.clientToken('k', 'token-b')).toBe(false);
  });

  it('expires after the interval, and keeps no token in Redis', async () => {
    await createRefusalCooldown({ redis, keys }).clientToken('k', 'secret-token-value');
    const ttl = await redis.pttl(keys.refusedClientToken('k'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(REFUSAL_COOLDOWN_MS);
    expect(await redis.get(keys.refusedClientToken('k'))).not.toContain('secret-token-value');
    await createRefusalCooldown({ redis, keys, intervalMs: 1234 }).clientToken('k2', 'x');
    expect(await redis.pttl(keys.refusedClientToken('k2'))).toBeLessThanOrEqual(1234);
  });
});
