/**
 * The wait between attempts to reach Redis again (src/redis/client.ts reconnectDelayMs): capped
 * at half a second (up to 2 s, the gateway answered 503 that long after Redis was back, and
 * missed a Redis flapping in 1 s windows whole; found by the flapping red team), jittered.
 * Mutations that fail this file: RECONNECT_MAX_MS back at 2000; the jitter factor removed.
 */
import { reconnectDelayMs, RECONNECT_MAX_MS } from '../../../src/redis/client.js';

it('doubles from 100 ms to at most half a second, however long Redis stays away', () => {
  const none = () => 0;
  expect([1, 2, 3, 4, 5, 6, 50, 10_000].map((n) => reconnectDelayMs(n, none))).toEqual([100, 200, 400, 500, 500, 500, 500, 500]);
  expect(RECONNECT_MAX_MS).toBeLessThanOrEqual(500);
});

it('takes up to a fifth off at random, so processes that lost Redis together do not knock in step', () => {
  expect(reconnectDelayMs(10, () => 0.999)).toBe(400);
  expect(reconnectDelayMs(10, () => 0.5)).toBe(450);
  expect(reconnectDelayMs(1, () => 0.5)).toBe(90);
});
