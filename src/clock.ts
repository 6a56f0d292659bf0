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

/** What `work` settles to, or `fallback` once `ms` have passed (the timer cleared either way). */
export function within<T>(work: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<T>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms), fallback)));
  return Promise.race([work, bound]).finally(() => clearTimeout(timer));
}
