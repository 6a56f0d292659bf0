/**
 * steady(): an injected clock with its backward steps absorbed (src/clock.ts), for in-process
 * waits; atMostEvery(), the gate of log lines said once per interval, on it.
 * Mutations that fail it (checked by hand): `offset += last - at` removed (both tests);
 * atMostEvery without `if (at - openedAt < ms) return false;`.
 */
import { atMostEvery, atMostEveryPerKey, steady, within } from '../../src/clock.js';

it('never goes back, and goes on from its last reading after a step back', () => {
  let wall = 1_000_000;
  const now = steady(() => wall);
  expect(now()).toBe(1_000_000);
  wall += 500;
  expect(now()).toBe(1_000_500);
  wall -= 3_600_000;
  expect(now()).toBe(1_000_500);
  wall += 1_000;
  expect(now()).toBe(1_001_500);
  // A forward step is kept: a wait ends early, never late.
  wall += 60_000;
  expect(now()).toBe(1_061_500);
});

it('opens at most once per interval, and a step back of the clock does not keep it shut', () => {
  let wall = 1_000_000;
  const may = atMostEvery(10_000, () => wall);
  expect(may()).toBe(true);
  expect(may()).toBe(false);
  wall += 9_999;
  expect(may()).toBe(false);
  wall += 1;
  expect(may()).toBe(true);
  wall -= 3_600_000;
  expect(may()).toBe(false);
  wall += 10_000;
  expect(may()).toBe(true);
});

// within(): the bound every close and acknowledgement waits under. Mutation (checked by hand):
// the timer resolving without `fallback` (`setTimeout(resolve, Math.max(0, ms))`).
it('settles to the work, or to the fallback once the time is up', async () => {
  await expect(within(Promise.resolve('done'), 1_000, 'late')).resolves.toBe('done');
  await expect(within(new Promise<string>(() => undefined), 10, 'late')).resolves.toBe('late');
  await expect(within(new Promise<string>(() => undefined), -5, 'late')).resolves.toBe('late');
});

describe('atMostEveryPerKey', () => {
  // Fails if the gate answers 0 while shut, or shares one gate across keys.
  it('opens once per interval for each key, and says how many times it was shut since', () => {
    let now = 0;
    const may = atMostEveryPerKey(10_000, () => now);
    expect([may('a'), may('a'), may('b'), may('a'), may('b')]).toEqual([0, undefined, 0, undefined, undefined]);
    now = 10_000;
    expect([may('a'), may('b'), may('a')]).toEqual([2, 1, undefined]);
  });
});
