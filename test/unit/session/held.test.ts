/**
 * Held sessions (src/session/held.ts): how an instance learns that a session it holds streams
 * for has ended, without polling Redis per socket. The Redis reads are counted stand-ins, the
 * clock and timers are Jest's fake ones.
 *
 * Mutation checks (done by hand once):
 *   - in checkIdle(), `armIdle(sessionDigest, entry, remaining + EXPIRY_MARGIN_MS)` →
 *     `armIdle(sessionDigest, entry, 1000)`: a session kept alive elsewhere is read every second,
 *     and "moves the deadline" fails.
 *   - in hold(), `if (ended)` → `if (ended && false)`: a hold taken just after the end stays
 *     open, and "ends at once a hold taken just after" fails.
 *   - in recheckOnce(), drop the `recheckRetry = setTimeout(…)` after a failed pass: "tries a
 *     failed re-check again soon" fails (the session stays open until its idle deadline).
 *   - in checkFailed(), drop `if (checksFailing) return;`, or in checkIdle() re-arm a failed check
 *     at a flat `retryMs`: "through an outage, backs off…" fails.
 */
import { afterEach, beforeEach, expect, jest } from '@jest/globals';
import { createSessionEvents, type SessionEvents } from '../../../src/session/events.js';
import { createHeldSessions, type HeldEnd } from '../../../src/session/held.js';

const IDLE_S = 60;
const ABSOLUTE_S = 600;
const D1 = 'a'.repeat(32);
const D2 = 'b'.repeat(32);

interface Fake {
  /** Remaining idle ms per digest; absent = gone. */
  ttl: Map<string, number>;
  reads: string[];
  existCalls: string[][];
  failing: boolean;
  /** Failures reported (onCheckFailed). */
  reported: number;
}

function setup() {
  const fake: Fake = { ttl: new Map(), reads: [], existCalls: [], failing: false, reported: 0 };
  const events: SessionEvents = createSessionEvents({ clock: Date.now });
  const published: string[] = [];
  events.subscribe(D1, (e) => published.push(e.type === 'signed-out' ? e.reason : e.type));
  const held = createHeldSessions({
    events,
    idleTimeoutSeconds: IDLE_S,
    absoluteTimeoutSeconds: ABSOLUTE_S,
    clock: Date.now,
    retryMs: 5000,
    onCheckFailed: () => void (fake.reported += 1),
    async remainingMs(d) {
      fake.reads.push(d);
      if (fake.failing) throw new Error('redis down');
      return fake.ttl.get(d);
    },
    async exist(digests) {
      fake.existCalls.push([...digests]);
      if (fake.failing) throw new Error('redis down');
      return digests.map((d) => fake.ttl.has(d));
    },
  });
  return { fake, events, held, published };
}

const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

beforeEach(() => {
  jest.useFakeTimers();
});
afterEach(() => {
  jest.useRealTimers();
});

describe('held sessions', () => {
  it('reads nothing while no deadline is due, however many holds there are', async () => {
    const { fake, held } = setup();
    fake.ttl.set(D1, IDLE_S * 1000);
    for (let i = 0; i < 1000; i++) held.hold(D1, { createdAt: Date.now() }, () => undefined);
    jest.advanceTimersByTime(IDLE_S * 1000 - 1);
    await flush();
    expect(fake.reads).toEqual([]);
  });

  it('at the idle deadline reads the one session once, and moves the deadline when activity elsewhere slid it', async () => {
    const { fake, held } = setup();
    const ended: HeldEnd[] = [];
    held.hold(D1, { createdAt: Date.now() }, (e) => ended.push(e));
    fake.ttl.set(D1, 30_000); // another instance served a call: 30 s left
    await jest.advanceTimersByTimeAsync(IDLE_S * 1000 + 300);
    expect(fake.reads).toEqual([D1]);
    await jest.advanceTimersByTimeAsync(29_000);
    expect(fake.reads).toEqual([D1]);
    fake.ttl.delete(D1); // then it idled out
    await jest.advanceTimersByTimeAsync(2_000);
    expect(fake.reads).toEqual([D1, D1]);
    expect(ended.map((e) => e.reason)).toEqual(['expired']);
  });

  it('counts a tokens-refreshed event from any instance as activity: the idle deadline moves without a read', async () => {
    const { fake, held, events } = setup();
    fake.ttl.set(D1, IDLE_S * 1000);
    held.hold(D1, { createdAt: Date.now() }, () => undefined);
    await jest.advanceTimersByTimeAsync(IDLE_S * 1000 - 5_000);
    events.publish(D1, { type: 'tokens-refreshed' });
    await jest.advanceTimersByTimeAsync(10_000);
    expect(fake.reads).toEqual([]);
    await jest.advanceTimersByTimeAsync(IDLE_S * 1000);
    expect(fake.reads).toEqual([D1]);
  });

  it('tells every holder of a session once when the bus says it ended, and only that session', async () => {
    const { events, held } = setup();
    const ends: string[] = [];
    held.hold(D1, { createdAt: Date.now() }, (e) => ends.push(`1a:${e.reason}`));
    held.hold(D1, { createdAt: Date.now() }, (e) => ends.push(`1b:${e.reason}`));
    held.hold(D2, { createdAt: Date.now() }, (e) => ends.push(`2:${e.reason}`));
    events.publish(D1, { type: 'signed-out', reason: 'provider-logout' });
    events.publish(D1, { type: 'signed-out', reason: 'logout' });
    expect(ends).toEqual(['1a:provider-logout', '1b:provider-logout']);
    expect(held.digests()).toEqual([D2]);
  });

  it('ends a session at its absolute timeout without asking Redis', async () => {
    const { fake, held } = setup();
    fake.ttl.set(D1, IDLE_S * 1000);
    const ended: HeldEnd[] = [];
    const createdAt = Date.now() - (ABSOLUTE_S - 10) * 1000;
    held.hold(D1, { createdAt }, (e) => ended.push(e));
    await jest.advanceTimersByTimeAsync(9_999);
    expect(ended).toEqual([]);
    await jest.advanceTimersByTimeAsync(2);
    expect(ended).toEqual([{ reason: 'expired', endedAt: createdAt + ABSOLUTE_S * 1000 }]);
    expect(fake.reads).toEqual([]);
  });

  // Fails if held.ts takes createdAt + the configured timeout again (`endsAt: auth &&
  // auth.createdAt + options.absoluteTimeoutSeconds * 1000`).
  it("ends a session at its sign-in's own end when the timeout was lengthened since", async () => {
    const { fake, held } = setup();
    fake.ttl.set(D1, IDLE_S * 1000);
    const ended: HeldEnd[] = [];
    const createdAt = Date.now();
    held.hold(D1, { createdAt, endsAt: createdAt + 30_000 }, (e) => ended.push(e));
    await jest.advanceTimersByTimeAsync(30_001);
    expect(ended).toEqual([{ reason: 'expired', endedAt: createdAt + 30_000 }]);
  });

  // Found by red team: the timers run on monotonic time, so after a forward step of the wall
  // clock a session past its end kept its streams open for the length of the step. Fails if
  // hold() no longer starts the sweep (`sweeper = setInterval(sweep, SWEEP_MS)` removed).
  it('ends a session whose absolute end a forward step of the clock has passed, within a sweep', async () => {
    const { fake, held } = setup();
    fake.ttl.set(D1, IDLE_S * 1000);
    const ended: HeldEnd[] = [];
    const createdAt = Date.now();
    held.hold(D1, { createdAt }, (e) => ended.push(e));
    // The wall clock jumps past the session's end; no timer has moved.
    jest.setSystemTime(createdAt + (ABSOLUTE_S + 3600) * 1000);
    await jest.advanceTimersByTimeAsync(5_001);
    expect(ended).toEqual([{ reason: 'expired', endedAt: createdAt + ABSOLUTE_S * 1000 }]);
    expect(held.digests()).toEqual([]);
  });

  it('never ends a session because Redis failed; it looks again later', async () => {
    const { fake, held } = setup();
    const ended: HeldEnd[] = [];
    held.hold(D1, { createdAt: Date.now() }, (e) => ended.push(e));
    fake.failing = true;
    await jest.advanceTimersByTimeAsync(IDLE_S * 1000 + 300);
    await held.recheck();
    expect(ended).toEqual([]);
    fake.failing = false;
    fake.ttl.set(D1, 10_000);
    await jest.advanceTimersByTimeAsync(5_000);
    expect(ended).toEqual([]);
    expect(held.digests()).toEqual([D1]);
  });

  it('through an outage, backs off each idle check and reports the failure once, not per session and retry', async () => {
    const { fake, held } = setup();
    const ended: HeldEnd[] = [];
    for (const d of [D1, D2]) held.hold(d, { createdAt: Date.now() }, (e) => ended.push(e));
    fake.failing = true;
    await jest.advanceTimersByTimeAsync(IDLE_S * 1000 + 300);
    const reads = () => fake.reads.length;
    expect(reads()).toBe(2);
    await jest.advanceTimersByTimeAsync(5_000); // the first retry, 5 s on
    expect(reads()).toBe(4);
    await jest.advanceTimersByTimeAsync(5_000); // the next one waits 10 s
    expect(reads()).toBe(4);
    await jest.advanceTimersByTimeAsync(5_000);
    expect(reads()).toBe(6);
    expect(fake.reported).toBe(1);
    fake.failing = false;
    fake.ttl.set(D1, IDLE_S * 1000);
    fake.ttl.set(D2, IDLE_S * 1000);
    await jest.advanceTimersByTimeAsync(20_000);
    expect(ended).toEqual([]);
    fake.failing = true;
    await jest.advanceTimersByTimeAsync(IDLE_S * 1000 + 1000);
    expect(fake.reported).toBe(2);
  });

  it('re-checks every held session in one batch after the bus came back, ending only the gone ones', async () => {
    const { fake, held } = setup();
    const ended: string[] = [];
    fake.ttl.set(D2, 1000);
    held.hold(D1, { createdAt: Date.now() }, () => ended.push('D1'));
    held.hold(D2, { createdAt: Date.now() }, () => ended.push('D2'));
    await held.recheck();
    expect(fake.existCalls).toEqual([[D1, D2]]);
    expect(ended).toEqual(['D1']);
    expect(held.digests()).toEqual([D2]);
  });

  it('tries a failed re-check again soon, so a session that ended while Redis was away is still closed', async () => {
    // The bus often reconnects before the command connection: the first pass fails.
    const { fake, held } = setup();
    const ended: string[] = [];
    fake.ttl.set(D2, 60_000);
    held.hold(D1, { createdAt: Date.now() }, () => ended.push('D1'));
    held.hold(D2, { createdAt: Date.now() }, () => ended.push('D2'));
    fake.failing = true;
    await held.recheck();
    expect(ended).toEqual([]);
    fake.failing = false;
    // Well before any idle deadline (60 s): the retry, not the deadline, finds D1 gone.
    await jest.advanceTimersByTimeAsync(1_000);
    expect(ended).toEqual(['D1']);
    expect(held.digests()).toEqual([D2]);
    expect(fake.existCalls.length).toBeGreaterThanOrEqual(2);
  });

  // Fails if, in session/held.ts recheckOnce, the `checksFailing = false;` after a good read is
  // removed: a re-check that recovered left the failure run open, and the next outage went unreported.
  it('reports the next outage too when a re-check, not an idle check, saw Redis recover', async () => {
    const { fake, held } = setup();
    fake.ttl.set(D1, 60_000);
    held.hold(D1, { createdAt: Date.now() }, () => undefined);
    fake.failing = true;
    await held.recheck();
    expect(fake.reported).toBe(1);
    fake.failing = false;
    await jest.advanceTimersByTimeAsync(1_000);
    fake.failing = true;
    await held.recheck();
    expect(fake.reported).toBe(2);
  });

  it('ends at once a hold taken just after its session was heard to end (the read raced the event)', async () => {
    const { events, held } = setup();
    events.publish(D2, { type: 'signed-out', reason: 'revoked' });
    const ended: string[] = [];
    held.hold(D2, { createdAt: Date.now() }, (e) => ended.push(e.reason));
    expect(ended).toEqual([]); // not inside hold(): the caller finishes setting up first
    await jest.advanceTimersByTimeAsync(0);
    expect(ended).toEqual(['revoked']);
    expect(held.digests()).toEqual([]);
  });

  it('releases a session once its last holder lets go: no timer, no subscription left', async () => {
    const { fake, held, events } = setup();
    const ended: string[] = [];
    const release = held.hold(D1, { createdAt: Date.now() }, () => ended.push('x'));
    release();
    release();
    expect(held.digests()).toEqual([]);
    events.publish(D1, { type: 'signed-out', reason: 'logout' });
    await jest.advanceTimersByTimeAsync(ABSOLUTE_S * 1000 * 2);
    expect(ended).toEqual([]);
    expect(fake.reads).toEqual([]);
  });
});
