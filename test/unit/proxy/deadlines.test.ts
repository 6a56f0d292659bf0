import { afterEach, beforeEach, expect, jest } from '@jest/globals';
import fc from 'fast-check';
import { createDeadlines } from '../../../src/proxy/deadlines.js';

interface Item {
  id: number;
  settled?: boolean;
}

function tracker(timeoutMs: number) {
  const expired: number[] = [];
  const deadlines = createDeadlines<Item>({
    timeoutMs,
    expire: (item) => expired.push(item.id),
    isSettled: (item) => item.settled === true,
    now: () => Date.now(),
  });
  return { deadlines, expired };
}

beforeEach(() => {
  jest.useFakeTimers();
});
afterEach(() => {
  jest.useRealTimers();
});

describe('createDeadlines', () => {
  it('expires an item that is not done within the timeout, once, and not before', () => {
    const { deadlines, expired } = tracker(1000);
    deadlines.track({ id: 1 });
    jest.advanceTimersByTime(750);
    expect(expired).toEqual([]);
    jest.advanceTimersByTime(500);
    expect(expired).toEqual([1]);
    jest.advanceTimersByTime(5000);
    expect(expired).toEqual([1]);
    expect(deadlines.size).toBe(0);
  });

  it('never expires an item done in time, and stops its timer once nothing is tracked', () => {
    const { deadlines, expired } = tracker(1000);
    const item = { id: 1 };
    deadlines.track(item);
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(500);
    deadlines.done(item);
    jest.advanceTimersByTime(5000);
    expect(expired).toEqual([]);
    expect(deadlines.size).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('lets items leave from the middle of the line and expires the rest in start order', () => {
    const { deadlines, expired } = tracker(1000);
    const items = [1, 2, 3, 4, 5].map((id) => ({ id }));
    for (const item of items) {
      deadlines.track(item);
      jest.advanceTimersByTime(10);
    }
    deadlines.done(items[2] as Item);
    deadlines.done(items[0] as Item);
    deadlines.done(items[4] as Item);
    expect(deadlines.size).toBe(2);
    jest.advanceTimersByTime(2000);
    expect(expired).toEqual([2, 4]);
  });

  it('drops items that ended another way without expiring them', () => {
    const { deadlines, expired } = tracker(1000);
    const gone: Item = { id: 1 };
    deadlines.track(gone);
    deadlines.track({ id: 2 });
    gone.settled = true;
    jest.advanceTimersByTime(300);
    // The settled item left at the first sweep, although its deadline had not passed.
    expect(deadlines.size).toBe(1);
    jest.advanceTimersByTime(1000);
    expect(expired).toEqual([2]);
  });

  it('tracks an item once, ignores done() for unknown items, and can track an item again after done()', () => {
    const { deadlines, expired } = tracker(1000);
    const item = { id: 7 };
    deadlines.done(item);
    deadlines.track(item);
    deadlines.track(item);
    expect(deadlines.size).toBe(1);
    deadlines.done(item);
    deadlines.done(item);
    expect(deadlines.size).toBe(0);
    deadlines.track(item);
    jest.advanceTimersByTime(1500);
    expect(expired).toEqual([7]);
  });

  it('forgets everything on close() and stops its timer', () => {
    const { deadlines, expired } = tracker(1000);
    deadlines.track({ id: 1 });
    deadlines.track({ id: 2 });
    deadlines.close();
    expect(deadlines.size).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(5000);
    expect(expired).toEqual([]);
  });

  it('sweeps at least four times per timeout, and at most every 250 ms', () => {
    const short = tracker(100);
    short.deadlines.track({ id: 1 });
    jest.advanceTimersByTime(100 + 25);
    expect(short.expired).toEqual([1]);

    const long = tracker(60_000);
    long.deadlines.track({ id: 2 });
    jest.advanceTimersByTime(60_000 + 250);
    expect(long.expired).toEqual([2]);
  });

  it('agrees with a plain list for any sequence of track, done and time passing', () => {
    const step = fc.oneof(
      fc.record({ op: fc.constant('track' as const), id: fc.nat(9) }),
      fc.record({ op: fc.constant('done' as const), id: fc.nat(9) }),
      fc.record({ op: fc.constant('wait' as const), ms: fc.integer({ min: 0, max: 600 }) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        jest.clearAllTimers();
        const timeoutMs = 1000;
        const { deadlines, expired } = tracker(timeoutMs);
        const items = new Map<number, Item>();
        const itemOf = (id: number) => items.get(id) ?? (items.set(id, { id }), items.get(id) as Item);
        // The model: tracked ids with their deadline, in start order; a sweep every 250 ms.
        let model: { id: number; at: number }[] = [];
        const modelExpired: number[] = [];
        let now = Date.now();
        let nextSweep = Number.POSITIVE_INFINITY;
        const sweepModel = (at: number) => {
          while (model.length > 0 && (model[0] as { at: number }).at <= at) modelExpired.push((model.shift() as { id: number }).id);
          nextSweep = model.length > 0 ? at + 250 : Number.POSITIVE_INFINITY;
        };
        for (const s of steps) {
          if (s.op === 'track') {
            if (!model.some((m) => m.id === s.id)) {
              model.push({ id: s.id, at: now + timeoutMs });
              if (nextSweep === Number.POSITIVE_INFINITY) nextSweep = now + 250;
            }
            deadlines.track(itemOf(s.id));
          } else if (s.op === 'done') {
            model = model.filter((m) => m.id !== s.id);
            deadlines.done(itemOf(s.id));
          } else {
            const end = now + s.ms;
            while (nextSweep <= end) sweepModel(nextSweep);
            now = end;
            jest.advanceTimersByTime(s.ms);
          }
          expect(deadlines.size).toBe(model.length);
        }
        expect(expired).toEqual(modelExpired);
        deadlines.close();
      }),
      { numRuns: 300 },
    );
  });
});
