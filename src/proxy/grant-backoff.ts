/**
 * Grants the provider refused or failed, remembered per process so that they are not asked
 * again on every call: 1 s, doubling to 30 s while the failures go on (a success forgets). A
 * client-credentials grant (client-token.ts) and a token exchange (token-exchange.ts) are asked
 * for by cheap calls, anonymous ones too: unremembered, each was one grant at the provider.
 */

import { steady } from '../clock.js';

/** How long a process waits before asking the provider again after a failed grant. */
export const GRANT_RETRY_MS = { first: 1_000, max: 30_000 } as const;

export interface GrantBackoff<E> {
  /** The failure remembered for `key` while its backoff lasts, and how long it still has (ms). */
  pending(key: string): { error: E; remainingMs: number } | undefined;
  /** Remembers a failure; returns how long `key` now waits (ms). */
  failed(key: string, error: E): number;
  succeeded(key: string): void;
}

/** @param max how many keys are remembered at most (the oldest forgotten first). */
export function createGrantBackoff<E>(wallClock: () => number, max = 10_000): GrantBackoff<E> {
  const clock = steady(wallClock);
  const failures = new Map<string, { until: number; delayMs: number; error: E }>();
  return {
    pending(key) {
      const known = failures.get(key);
      const remainingMs = known === undefined ? 0 : known.until - clock();
      return known !== undefined && remainingMs > 0 ? { error: known.error, remainingMs } : undefined;
    },
    failed(key, error) {
      const delayMs = Math.min(GRANT_RETRY_MS.max, 2 * (failures.get(key)?.delayMs ?? GRANT_RETRY_MS.first / 2));
      failures.delete(key);
      if (failures.size >= max) failures.delete(failures.keys().next().value as string);
      failures.set(key, { until: clock() + delayMs, delayMs, error });
      return delayMs;
    },
    succeeded: (key) => void failures.delete(key),
  };
}
