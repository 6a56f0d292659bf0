/**
 * A provider's logout of many sessions (session/provider-logouts.ts): ended at most
 * ENDS_AT_ONCE at a time, no longer one after another (a logout by `sub` of 1,000 sessions took
 * 1,000 times an end's round trips while the provider waited; npm run bench:backchannel), and
 * none started after the first failure. `end` is the test's, which counts and holds each.
 *
 * Fails if endAll ends in turn (`ENDS_AT_ONCE` → 1 in its atMost call): "ends them at most";
 * or if atMost starts items after a failure (`!failed &&` removed): "starts none after".
 */
import { randomBytes } from 'node:crypto';
import { createSealer } from '../../../src/crypto/seal.js';
import { createKeys, digest } from '../../../src/redis/keys.js';
import { createMemoryRedis } from '../../../src/redis/memory.js';
import type { StoredSession } from '../../../src/session/records.js';
import { createSessionRecords } from '../../../src/session/records.js';
import { createProviderLogouts, ENDS_AT_ONCE } from '../../../src/session/provider-logouts.js';
import { providerSessionDigest } from '../../../src/session/user-index.js';
import { eventually } from '../../support/wait.js';

const iss = 'https://idp.example';
const redis = createMemoryRedis();
afterAll(() => redis.disconnect());

/** 40 sessions under one provider session, and an `end` that holds each call for a macrotask. */
async function setUp(failAt?: number) {
  const keys = createKeys(`pl${randomBytes(4).toString('hex')}:`);
  const records = createSessionRecords({ redis, keys, sealer: createSealer([randomBytes(32).toString('base64')]), idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600 });
  const digests = Array.from({ length: 40 }, (_, i) => digest(`session ${i} ${randomBytes(4).toString('hex')}`));
  await redis.sadd(keys.providerSession(providerSessionDigest(iss, 'sid-1')), ...digests);
  const stats = { started: 0, inFlight: 0, peak: 0 };
  const end = async (d: string): Promise<StoredSession | undefined> => {
    stats.started += 1;
    const call = stats.started;
    stats.inFlight += 1;
    stats.peak = Math.max(stats.peak, stats.inFlight);
    await new Promise((resolve) => setImmediate(resolve));
    stats.inFlight -= 1;
    if (call === failAt) throw new Error('Command timed out');
    return { tokens: { v: 1, sealed: `sealed ${d}` } };
  };
  const logouts = createProviderLogouts({ redis, keys, records, end, endedWithRevocation: async () => false });
  return { logouts, stats, digests };
}

it('ends them at most ENDS_AT_ONCE at a time, and every one', async () => {
  const { logouts, stats, digests } = await setUp();
  const ended = await logouts.endByProviderSession(iss, 'sid-1', undefined, Math.floor(Date.now() / 1000));
  expect(ended.map((e) => e.digest).sort()).toEqual([...digests].sort());
  expect(ENDS_AT_ONCE).toBeGreaterThan(1);
  expect(stats.peak).toBe(ENDS_AT_ONCE);
});

it('starts none after the first failure, and rejects with it', async () => {
  const { logouts, stats } = await setUp(3);
  await expect(logouts.endByProviderSession(iss, 'sid-1', undefined, Math.floor(Date.now() / 1000))).rejects.toThrow('Command timed out');
  // Those still under way finish; a worker that went on would have started the next meanwhile.
  await eventually('the ends under way to finish', 2_000, () => stats.inFlight === 0, { intervalMs: 1 });
  expect(stats.started).toBeLessThan(2 * ENDS_AT_ONCE);
});
