/**
 * Bounded waits, the only two the suite uses: a promise raced against a deadline, and a
 * condition polled until it holds or a deadline passes. A wait that runs out fails with what
 * was awaited; nothing here waits on the wall clock alone.
 */

export interface WithTimeoutOptions<T> {
  /** Resolve with this instead of failing when the deadline passes (a best-effort read). */
  fallback?: T;
}

/** `promise`, or a failure naming `what` after `ms` (or `options.fallback`, when given). */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string, options: WithTimeoutOptions<T> = {}): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<T>((resolve, reject) => {
    timer = setTimeout(() => ('fallback' in options ? resolve(options.fallback as T) : reject(new Error(`${what}: not within ${ms} ms`))), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

export interface EventuallyOptions {
  /** Pause between reads (default 50 ms). */
  intervalMs?: number;
  /** A read that throws counts as "not yet" (e.g. a server still starting). */
  ignoreErrors?: boolean;
  /** Checked before each read: a reason to give up at once (e.g. the process exited). */
  abort?: () => string | undefined;
}

type Settled<T> = Exclude<T, undefined | false>;

/**
 * Reads until `read` gives a value other than undefined or false (a boolean check gives true),
 * for at most `ms`; then fails naming `what`.
 */
export async function eventually<T>(what: string, ms: number, read: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<Settled<T>> {
  const deadline = performance.now() + ms;
  for (;;) {
    const aborted = options.abort?.();
    if (aborted) throw new Error(`${what}: ${aborted}`);
    const value = options.ignoreErrors ? await Promise.resolve().then(read).catch(() => undefined) : await read();
    if (value !== undefined && value !== false) return value as Settled<T>;
    if (performance.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 50));
  }
}
