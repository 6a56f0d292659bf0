/**
 * The revoker's bound on revocations in flight (src/oidc/revocation.ts): a back-channel logout
 * ends every session of a user at once, and one logout token for 2,000 sessions opened 2,000
 * connections to the provider together (found by red team). The revocation itself is replaced
 * by one the test finishes by hand.
 *
 * Mutations that fail this file (checked by hand):
 * - turn(): `if (running < inFlight)` made `if (true)`: the in-flight test.
 * - turn(): `if (waiting.length >= queued) return undefined;` removed: the queue test.
 * - passTurn(): `if (next) next();` made `if (next) { running -= 1; next(); }` (a turn handed on
 *   and given back): the in-flight test (more than the bound run once the first ones end).
 */
import type { Logger } from '../../../src/observability/logger.js';
import { createLogger } from '../../../src/observability/logger.js';
import type { ProviderHandle, ProviderState } from '../../../src/oidc/client.js';
import { createRevoker } from '../../../src/oidc/revocation.js';

const provider: ProviderHandle = {
  get: () => ({}) as ProviderState,
  isReady: () => true,
  ready: async () => ({}) as ProviderState,
  close: () => undefined,
};

function setup(inFlight: number, queued: number) {
  const lines: string[] = [];
  const logger: Logger = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(line) } });
  let running = 0;
  let peak = 0;
  let started = 0;
  const finishers: (() => void)[] = [];
  const revoke = createRevoker(provider, logger, {
    inFlight,
    queued,
    waitMs: 10,
    revokeTokens: () => {
      running += 1;
      started += 1;
      peak = Math.max(peak, running);
      return new Promise<number>((resolve) =>
        finishers.push(() => {
          running -= 1;
          resolve(0);
        }),
      );
    },
  });
  /** Finishes the revocations in flight, then lets the queue move on. */
  const finishRunning = async () => {
    for (const finish of finishers.splice(0)) finish();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { revoke, lines, finishRunning, stats: () => ({ running, peak, started }) };
}

const tokens = (i: number) => ({ accessToken: `at-${i}`, refreshToken: `rt-${i}` });

it('runs at most `inFlight` revocations at once, and every one of them in turn', async () => {
  const { revoke, finishRunning, stats } = setup(4, 100);
  const answered = Array.from({ length: 10 }, (_, i) => revoke(tokens(i)));
  await new Promise((resolve) => setImmediate(resolve));
  expect(stats()).toEqual({ running: 4, peak: 4, started: 4 });
  expect(revoke.underWay()).toBe(10);
  // Callers are not held past their wait while theirs waits its turn.
  await Promise.all(answered);
  // The first four end: their turns pass to four waiting; newcomers still wait.
  await finishRunning();
  for (let i = 10; i < 14; i++) void revoke(tokens(i));
  await new Promise((resolve) => setImmediate(resolve));
  expect(stats()).toEqual({ running: 4, peak: 4, started: 8 });
  for (let round = 0; round < 4; round++) await finishRunning();
  expect(stats()).toEqual({ running: 0, peak: 4, started: 14 });
  await revoke.settle(1000);
  expect(revoke.underWay()).toBe(0);
});

it('drops what is past the queue, said in one log line per overflow', async () => {
  const { revoke, lines, finishRunning, stats } = setup(2, 3);
  for (let i = 0; i < 10; i++) void revoke(tokens(i));
  await new Promise((resolve) => setImmediate(resolve));
  expect(revoke.underWay()).toBe(5);
  expect(lines.filter((l) => l.includes('"revocation_dropped"'))).toHaveLength(1);
  for (let round = 0; round < 3; round++) await finishRunning();
  expect(stats().started).toBe(5);
  // Drained: the next overflow is told again.
  for (let i = 0; i < 10; i++) void revoke(tokens(i));
  await new Promise((resolve) => setImmediate(resolve));
  expect(lines.filter((l) => l.includes('"revocation_dropped"'))).toHaveLength(2);
  expect(lines.join('\n')).not.toMatch(/at-\d|rt-\d/);
});

// The revocation journal releases an entry only on `success` (session/ended-revocations.ts): a
// drop past the queue or a provider not ready must say so, or the journal let go of a revocation
// never sent. Fails if endedAt() tells `settled` 'success' (`settled(outcome)` → `settled('success')`),
// or does not track it (`if (settled) track(` → `if (settled) void (`), or if the revocation's
// `settled` is awaited outside the work it tracks.
it('tells `settled` how each revocation ended, past the caller\'s wait, and counts it as under way', async () => {
  const { revoke, finishRunning } = setup(1, 1);
  const told: string[] = [];
  // Each `settled` is a Redis command in the journal: held here until the test lets them finish.
  const releases: (() => void)[] = [];
  const settled = (i: number) => (outcome: string) => {
    told.push(`${i} ${outcome}`);
    return new Promise<void>((resolve) => releases.push(resolve));
  };
  const answered = [0, 1, 2].map((i) => revoke(tokens(i), settled(i)));
  await Promise.all(answered);
  // 0 runs, 1 waits its turn, 2 is past the queue; the callers were answered after their 10 ms.
  expect(told).toEqual(['2 dropped']);
  // The dropped one's `settled` is still under way, with the two revocations.
  expect(revoke.underWay()).toBe(3);
  await finishRunning();
  await finishRunning();
  expect(told.sort()).toEqual(['0 success', '1 success', '2 dropped']);
  expect(revoke.underWay()).toBe(3);
  // settle() waits for them: not settled within 50 ms while they are held.
  await revoke.settle(50);
  expect(revoke.underWay()).toBe(3);
  for (const release of releases.splice(0)) release();
  await revoke.settle(1000);
  expect(revoke.underWay()).toBe(0);
  const down = createRevoker({ ...provider, isReady: () => false }, createLogger({ level: 'silent' }));
  await down(tokens(3), settled(3));
  await down.settle(1000);
  expect(told).toContain('3 failure');
});
