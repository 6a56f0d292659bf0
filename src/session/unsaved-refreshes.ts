/**
 * Token sets the provider issued that Redis did not take: Redis failed or stalled between the
 * provider's answer and the compare-and-set. With refresh-token rotation the new set holds the
 * only refresh token still valid, so dropping it would sign the user out the next time anyone
 * refreshed with the old one (invalid_grant, or a provider's reuse detection revoking the
 * grant): a Redis hiccup must never do that (SPEC §7).
 *
 * So the set is kept in this process and written as soon as Redis answers again: retried in the
 * background (one shared timer, however many sessions are waiting), and tried first by the next
 * refresh of that session on this process, before any provider call. The write is the same
 * compare-and-set on the version, so a kept set never overwrites a newer one.
 *
 * A kept set also keeps the session's refresh lock, re-armed on every retry and released once
 * the set is written or given up: another process that took the lock meanwhile would read the
 * old version and refresh with the spent refresh token (invalid_grant: signed out).
 *
 * At shutdown each kept set is written again before Redis is closed, every retryMs for what is
 * left of the shutdown budget: Redis may have come back since the last retry, or come back
 * meanwhile, and the process leaving must not take the only valid refresh token with it.
 */
import { sleep, type Lock } from '../redis/lock.js';
import type { CasResult } from './records.js';
import type { TokenSet, VersionedTokens } from './tokens.js';

/** How long a set is kept for Redis by default before it is given up. */
export const UNSAVED_KEEP_MS = 10 * 60_000;

export interface UnsavedRefreshesOptions {
  /** Compare-and-set of `next` over version `seenVersion` (throws when Redis fails). */
  write(digest: string, seenVersion: number, next: TokenSet): Promise<CasResult>;
  /** How often kept sets are retried (and their locks re-armed: shorter than the lock's TTL). */
  retryMs?: number;
  /** How long a set is kept before it is given up. */
  keepMs?: number;
  /** At most this many sets are kept (oldest dropped first). */
  max?: number;
  clock?: () => number;
  /**
   * A kept set was written after all (`saved`), is not needed (`dropped`: superseded, session
   * gone), or was lost (`given-up`: kept too long or too many, or Redis still failed at close):
   * its session holds a spent refresh token now, and its next refresh will fail.
   */
  onSettled?: (outcome: SettledOutcome, digest: string, handle: string | undefined) => void;
  /** A kept set found its session gone: nothing holds it (refresh.ts onOrphaned decides whether to revoke it). */
  onOrphaned?: (digest: string, next: TokenSet) => void;
}

export interface UnsavedRefreshes {
  /**
   * Keeps `next`, the successor of `digest`'s version `seenVersion`, with the refresh lock its
   * process holds: extended while the set waits, released once it is written or given up.
   * `handle`, the session's public handle, is handed back to onSettled.
   */
  keep(digest: string, seenVersion: number, next: TokenSet, lock?: Pick<Lock, 'extend' | 'release'>, handle?: string): void;
  /**
   * Writes the set kept for (digest, seenVersion) now. Resolves to the written set, or undefined
   * when none is kept or it was superseded; throws (and keeps it) when Redis still fails.
   */
  flush(digest: string, seenVersion: number): Promise<VersionedTokens | undefined>;
  /** Sets waiting for Redis. */
  readonly size: number;
  /**
   * Stops the background retries and writes every kept set (the same compare-and-set), again
   * every retryMs for up to `waitMs` (default 0: one last write). A set that still fails is
   * given up (onSettled `given-up`). Resolves once every lock is released, so Redis must still be
   * open. Each try is bounded by the Redis command timeout: nothing queues while Redis is down.
   */
  close(waitMs?: number): Promise<void>;
}

export type SettledOutcome = 'saved' | 'dropped' | 'given-up';

interface Kept {
  digest: string;
  seenVersion: number;
  next: TokenSet;
  lock: Pick<Lock, 'extend' | 'release'> | undefined;
  handle: string | undefined;
  until: number;
  writing: Promise<VersionedTokens | undefined> | undefined;
  /** The lock's release, once settled (awaited by close). */
  released: Promise<void> | undefined;
}

export function createUnsavedRefreshes(options: UnsavedRefreshesOptions): UnsavedRefreshes {
  const retryMs = options.retryMs ?? 1000;
  const keepMs = options.keepMs ?? UNSAVED_KEEP_MS;
  const max = options.max ?? 10_000;
  const clock = options.clock ?? Date.now;
  const kept = new Map<string, Kept>();
  let timer: NodeJS.Timeout | undefined;

  const keyOf = (digest: string, seenVersion: number) => `${digest}:${seenVersion}`;

  function settle(key: string, entry: Kept, outcome: SettledOutcome): void {
    if (kept.get(key) === entry) kept.delete(key);
    // Best effort: the lock's TTL frees it anyway.
    entry.released = entry.lock?.release().then(() => undefined);
    if (kept.size === 0 && timer) {
      clearInterval(timer);
      timer = undefined;
    }
    options.onSettled?.(outcome, entry.digest, entry.handle);
  }

  function attempt(key: string, entry: Kept): Promise<VersionedTokens | undefined> {
    entry.writing ??= options
      .write(entry.digest, entry.seenVersion, entry.next)
      .then(
        (result) => {
          if (result !== 'written') {
            settle(key, entry, 'dropped');
            if (result === 'missing') options.onOrphaned?.(entry.digest, entry.next);
            return undefined;
          }
          settle(key, entry, 'saved');
          return { version: entry.seenVersion + 1, tokens: entry.next };
        },
        (err: unknown) => {
          throw err;
        },
      )
      .finally(() => {
        entry.writing = undefined;
      });
    return entry.writing;
  }

  /** One try for every kept set (those kept too long are given up); resolves once all answered. */
  function sweep(): Promise<unknown> {
    const now = clock();
    const tries: Array<Promise<unknown>> = [];
    for (const [key, entry] of kept) {
      if (entry.until <= now) settle(key, entry, 'given-up');
      else {
        // Before the write: a lock that lapsed would let another process refresh with the spent token.
        entry.lock?.extend().catch(() => undefined);
        tries.push(attempt(key, entry).catch(() => undefined)); // still down: next sweep
      }
    }
    return Promise.all(tries);
  }

  return {
    keep(digest, seenVersion, next, lock, handle) {
      const key = keyOf(digest, seenVersion);
      if (!kept.has(key) && kept.size >= max) {
        const [oldestKey, oldest] = kept.entries().next().value as [string, Kept];
        settle(oldestKey, oldest, 'given-up');
      }
      kept.set(key, { digest, seenVersion, next, lock, handle, until: clock() + keepMs, writing: undefined, released: undefined });
      if (!timer) {
        timer = setInterval(() => void sweep(), retryMs);
        timer.unref();
      }
    },
    async flush(digest, seenVersion) {
      const key = keyOf(digest, seenVersion);
      const entry = kept.get(key);
      if (!entry) return undefined;
      if (entry.until <= clock()) {
        settle(key, entry, 'given-up');
        return undefined;
      }
      return attempt(key, entry);
    },
    get size() {
      return kept.size;
    },
    async close(waitMs = 0) {
      if (timer) clearInterval(timer);
      timer = undefined;
      const waiting = [...kept];
      // Tried every retryMs while the budget lasts: a process stopped during a Redis outage (a
      // deploy) dropped the set at its first failed write, the only valid refresh token with it.
      const deadline = performance.now() + waitMs;
      for (;;) {
        await sweep();
        if (kept.size === 0 || performance.now() + retryMs > deadline) break;
        await sleep(retryMs);
      }
      for (const [key, entry] of [...kept]) settle(key, entry, 'given-up');
      await Promise.all(waiting.map(([, entry]) => entry.released));
    },
  };
}
