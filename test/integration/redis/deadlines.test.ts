/**
 * Command deadlines (src/redis/deadlines.ts) against a real Redis stopped with SIGSTOP: each
 * command fails once it is `commandTimeoutMs` old, not with the ones sent before it, and the
 * connection stays in step after Redis comes back (a late answer goes to its own, failed,
 * command). And a healthy Redis never sees a command failed: not after an error reply, not
 * after a reconnect (both take the command off ioredis's queue without "resolving" it).
 *
 * Fails if, in src/redis/deadlines.ts `failBetween`, `if ((command[TICK] ?? Infinity) > through) return;`
 * is removed (a command sent later fails with the first), or if `createRedis` leaves out
 * `withDeadlines(...)` and no `commandTimeout` is passed (nothing fails while Redis is
 * stopped). The error-reply and reconnect cases fail on the first version (07951d2), which
 * followed one marked command and, once it was gone from the queue, failed every command in it.
 */
import type { Redis } from 'ioredis';
import { closeRedis, connectRedis, createRedis, duplicateConnection, disconnectRedis } from '../../../src/redis/client.js';
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

/** Busy for `ms` inside Redis (a slow command on a healthy server), then 1 or an error reply. */
const BUSY = `
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat
  local n = redis.call('TIME')
until n[1] * 1000000 + n[2] - start >= tonumber(ARGV[1]) * 1000
if ARGV[2] == 'fail' then return redis.error_reply('ERR planned') end
return 1`;
const busy = (client: Redis, ms: number, fail = false) => client.eval(BUSY, 0, String(ms), fail ? 'fail' : 'ok');

/**
 * Slow but healthy commands in flight through the window in which a command sent at `t0` would
 * come due (`timeoutMs` to `timeoutMs` plus two ticks after it), each answered well within the
 * timeout: three 30 ms commands every 100 ms (Redis busy 90% of the time, never behind). All must
 * succeed.
 */
async function expectNoneFailedAround(client: Redis, t0: number, timeoutMs: number): Promise<void> {
  const until = (at: number) => new Promise((r) => setTimeout(r, Math.max(0, t0 + at - performance.now())));
  const sent: Array<Promise<unknown>> = [];
  for (let at = timeoutMs - 200; at <= timeoutMs * 1.2 + 200; at += 100) {
    await until(at);
    for (let i = 0; i < 3; i++) sent.push(busy(client, 30));
  }
  const results = await withTimeout(Promise.allSettled(sent), 10_000, 'the healthy commands');
  expect(results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
}

describe('a healthy Redis', () => {
  const SLOW_TIMEOUT_MS = 1000;
  let client: Redis;
  beforeAll(async () => {
    client = createRedis({ url: server.url, commandTimeoutMs: SLOW_TIMEOUT_MS, keyPrefix: 'h:' }) as Redis;
    await connectRedis(client, 5000);
  });
  afterAll(() => closeRedis(client));

  it('fails nothing after a command that was answered with an error while in flight for several ticks', async () => {
    const t0 = performance.now();
    await expect(busy(client, 250, true)).rejects.toThrow('ERR planned');
    await expectNoneFailedAround(client, t0, SLOW_TIMEOUT_MS);
  });

  it('fails nothing on a new connection after one closed with a command in flight', async () => {
    const t0 = performance.now();
    const inFlight = settle(busy(client, 250), t0);
    await new Promise((r) => setTimeout(r, 150));
    client.stream.destroy();
    expect((await withTimeout(inFlight, 10_000, 'the cut command')).error).toBeDefined();
    await withTimeout(
      new Promise<void>((resolve) => (client.status === 'ready' ? resolve() : client.once('ready', () => resolve()))),
      10_000,
      'the reconnect',
    );
    await expectNoneFailedAround(client, t0, SLOW_TIMEOUT_MS);
  });
});

it('gives a subscriber the same deadlines', async () => {
  const subscriber = duplicateConnection(redis) as Redis;
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
