/**
 * steady(): an injected clock with its backward steps absorbed (src/clock.ts), for in-process
 * waits. Mutation that fails it (checked by hand): `offset += last - at` removed.
 */
import { steady } from '../../src/clock.js';

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
