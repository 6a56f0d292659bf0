/**
 * Timing of Redis operations, reported to whoever wires it in (the runtime: metrics). Domain
 * modules name their operations (`session_read`, `transaction_take`, ...), which keeps the
 * metric's labels a short, fixed list.
 */

/** One finished Redis operation: its name, how long it took, and whether it failed. */
export type RedisObserver = (operation: string, seconds: number, failed: boolean) => void;

export type Timed = <T>(operation: string, run: () => Promise<T>) => Promise<T>;

export function createTimed(observe: RedisObserver | undefined): Timed {
  if (!observe) return (_operation, run) => run();
  return async (operation, run) => {
    const start = performance.now();
    try {
      const value = await run();
      observe(operation, (performance.now() - start) / 1000, false);
      return value;
    } catch (err) {
      observe(operation, (performance.now() - start) / 1000, true);
      throw err;
    }
  };
}
