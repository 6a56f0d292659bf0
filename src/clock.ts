/**
 * Clocks. The gateway's clock (`Date.now`, injected as `clock`) is wall time: what tokens,
 * records and other processes compare. A wait measured on it lasts as long as a step of the
 * host's clock (NTP, a VM restored): a one-second backoff lasted an hour after a step back of an
 * hour (found by red team).
 */

/** How far apart the clocks of a deployment's processes (and Redis's) may be (README, Sessions). */
export const MAX_CLOCK_SKEW_SECONDS = 300;

/**
 * `clock` with its backward steps absorbed: readings never go back, and after a step back the
 * time goes on from the last reading. For in-process durations measured on an injected clock
 * (tests move it); a forward step still shortens them, which ends a wait early, never late.
 */
export function steady(clock: () => number): () => number {
  let offset = 0;
  let last = Number.NEGATIVE_INFINITY;
  return () => {
    const at = clock() + offset;
    if (at < last) {
      offset += last - at;
      return last;
    }
    last = at;
    return at;
  };
}

/**
 * A gate that opens at most once per `ms` of `clock` (steady: a step back of the host's clock
 * does not keep it shut): for log lines said once per interval, however often their cause comes.
 */
export function atMostEvery(ms: number, clock: () => number): () => boolean {
  const now = steady(clock);
  let openedAt = Number.NEGATIVE_INFINITY;
  return () => {
    const at = now();
    if (at - openedAt < ms) return false;
    openedAt = at;
    return true;
  };
}

/** Keys a gate of atMostEveryPerKey keeps at most (past it, they start afresh). */
const MAX_GATE_KEYS = 1000;

/**
 * atMostEvery per key, counting what it held back: `pass(key)` answers how many times the
 * gate of `key` was shut since it last opened (0 or more) as it opens, and undefined while
 * shut. For log lines about a dependency's failures: one line per interval and key says how
 * many it stands for (a line per failing call wrote 1.3 GB an hour at 1,000 calls/s).
 */
export function atMostEveryPerKey(ms: number, clock: () => number): (key: string) => number | undefined {
  const gates = new Map<string, { open: () => boolean; held: number }>();
  return (key) => {
    let gate = gates.get(key);
    if (gate === undefined) {
      if (gates.size >= MAX_GATE_KEYS) gates.clear();
      gates.set(key, (gate = { open: atMostEvery(ms, clock), held: 0 }));
    }
    if (!gate.open()) {
      gate.held += 1;
      return undefined;
    }
    const held = gate.held;
    gate.held = 0;
    return held;
  };
}

/** A dependency's failures (503, 502, 504, a refused upgrade or logout token) are said once per this, per key. */
export const FAILURE_LOG_INTERVAL_MS = 10_000;

/** The one gate of every failure log line: once per FAILURE_LOG_INTERVAL_MS per key, with the count held back. */
export const failureLogGate = (clock: () => number): ((key: string) => number | undefined) => atMostEveryPerKey(FAILURE_LOG_INTERVAL_MS, clock);

/** setTimeout's longest delay: past it Node fires at once (and warns). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * What `work` settles to, or `fallback` once `ms` have passed (the timer cleared either way).
 * `unref`: the bound alone keeps no process alive (a caller that may be let go at exit).
 */
export function within<T>(work: Promise<T>, ms: number, fallback: T, options: { unref?: boolean } = {}): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<T>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, ms), fallback);
    if (options.unref) timer.unref();
  });
  return Promise.race([work, bound]).finally(() => clearTimeout(timer));
}
