/**
 * Command deadlines (src/redis/deadlines.ts) against a real Redis stopped with SIGSTOP: each
 * command fails once it is `commandTimeoutMs` old, not with the ones sent before it, and the
 * connection stays in step after Redis comes back (a late answer goes to its own, failed,
 * command).
 *
 * Fails if, in deadlines.ts `failUpTo`, `if (command === due) return;` is removed (a command
 * sent later fails with the first), or if `createRedis` leaves out `withDeadlines(...)` and no
 * `commandTimeout` is passed (nothing fails while Redis is stopped).
 */
import type { Redis } from 'ioredis';
import { closeRedis, connectRedis, createRedis, createSubscriber, disconnectRedis } from '../../../src/redis/client.js';
import { startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { withTimeout } from '../../support/wait.js';

const TIMEOUT_MS = 300;
const LATER_MS = 150;

let server: RedisServer;
let redis: Redis;

beforeAll(async () => {
  server = await startRedisServer();
  redis = createRedis({ url: server.url, commandTimeoutMs: TIMEOUT_MS, keyPrefix: 'd:' }) as Redis;
  await connectRedis(redis, 5000);
});

afterAll(async () => {
  server.resume();
  await closeRedis(redis);
  await server.stop();
});

/** When a command settled, relative to `t0`, and how. */
async function settle(promise: Promise<unknown>, t0: number): Promise<{ ms: number; error?: string; value?: unknown }> {
  try {
    const value = await promise;
    return { ms: performance.now() - t0, value };
  } catch (err) {
    return { ms: performance.now() - t0, error: (err as Error).message };
  }
}

it('arms no timer of its own per command', async () => {
  expect(redis.options.commandTimeout).toBeUndefined();
  await expect(redis.ping()).resolves.toBe('PONG');
});

it('fails each command of a stalled Redis once it is commandTimeoutMs old, not before', async () => {
  await redis.set('a', '1');
  await redis.set('b', '2');
  server.pause();
  try {
    const t0 = performance.now();
    const first = settle(redis.get('a'), t0);
    await new Promise((r) => setTimeout(r, LATER_MS));
    const t1 = performance.now();
    const second = settle(redis.get('b'), t1);

    const a = await withTimeout(first, 10_000, 'the first command to fail');
    expect(a.error).toBe('Command timed out');
    expect(a.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 1);
    const b = await withTimeout(second, 10_000, 'the second command to fail');
    expect(b.error).toBe('Command timed out');
    // Its own deadline, not the first command's: sent LATER_MS after it.
    expect(b.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 1);
  } finally {
    server.resume();
  }
  // The two late answers go to the failed commands: the next ones get their own.
  await expect(redis.get('b')).resolves.toBe('2');
  await expect(redis.get('a')).resolves.toBe('1');
});

it('gives a subscriber the same deadlines', async () => {
  const subscriber = createSubscriber(redis) as Redis;
  try {
    expect(subscriber.options.commandTimeout).toBeUndefined();
    await connectRedis(subscriber, 5000);
    server.pause();
    try {
      const t0 = performance.now();
      const result = await withTimeout(settle(subscriber.subscribe('events'), t0), 10_000, 'the subscribe to fail');
      expect(result.error).toBe('Command timed out');
      expect(result.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 1);
    } finally {
      server.resume();
    }
  } finally {
    disconnectRedis(subscriber);
  }
});
