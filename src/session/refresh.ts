/**
 * Single-flight token refresh for one session, across requests and across gateway processes.
 *
 * Invariants:
 *  1. The provider sees one refresh per expiry of a session's token set, however many requests
 *     and processes ask at once: in-process callers share one promise; across processes a Redis
 *     lock (SET NX PX) elects one refresher, and the others poll the record until its version
 *     moves past the one they saw (bounded wait).
 *  2. The holder re-reads the record after taking the lock and refreshes only if the version is
 *     still the one the caller saw; otherwise it returns the newer set (someone else refreshed).
 *  3. The new set is written by compare-and-set on the version, so an older set can never
 *     overwrite a newer one; a rotated refresh token replaces the old one in that same write.
 *  4. A token set the provider issued but Redis failed to take is never dropped (its rotated
 *     refresh token is the only valid one): it is kept in this process and written as soon as
 *     Redis answers (unsaved-refreshes.ts), before this process asks the provider again. The
 *     kept set holds the lock until then, so no other process refreshes with the spent token.
 *     Should the lock lapse all the same (Redis away for longer than its TTL), the note the
 *     holder left before asking the provider (`refreshing:`, the version it refreshes) makes
 *     the next holder wait a while for the kept set before it spends the same refresh token.
 *  5. A refresh the provider refused for good (login_required: invalid_grant, any other 400,
 *     a changed subject) ends the session, unless the record moved past the version the refresh
 *     started from meanwhile (a kept set written after its lock lapsed: the refused token was
 *     spent by that set, which is the session's now); any other failure keeps it
 *     (token_refresh_failed), so a later request can try again. Which answers are which is the
 *     injected function's business (src/oidc/errors.ts).
 *
 * The provider call is injected (`refresh`), so this module knows nothing about OIDC.
 */
import { GatewayError } from '../errors.js';
import { within } from '../clock.js';
import { sleep, tryLock, type Lock } from '../redis/lock.js';
import { sessionGone } from './gone.js';
import { storeUnavailable } from '../redis/errors.js';
import type { TokenSet, VersionedTokens } from './tokens.js';
import { createUnsavedRefreshes, UNSAVED_KEEP_MS } from './unsaved-refreshes.js';
import type { OwnedRefreshCoordinator, RefreshContext, RefreshCoordinatorOptions, RefreshFn } from './refresh-contract.js';

export type {
  OwnedRefreshCoordinator,
  RefreshContext,
  RefreshCoordinator,
  RefreshCoordinatorOptions,
  RefreshFn,
  RefreshOutcome,
  RefreshReport,
} from './refresh-contract.js';

/** How long close() waits for refreshes under way, by default (the supervisor allows for it). */
export const REFRESH_CLOSE_WAIT_MS = 15_000;

export function createRefreshCoordinator(options: RefreshCoordinatorOptions): OwnedRefreshCoordinator {
  const { redis, keys, records, vault, endSession } = options;
  const lockTtlMs = options.lockTtlMs ?? 15_000;
  const maxWaitMs = options.maxWaitMs ?? 12_000;
  const pollIntervalMs = options.pollIntervalMs ?? 50;
  const closeWaitMs = options.closeWaitMs ?? REFRESH_CLOSE_WAIT_MS;
  const unsavedRetryMs = options.unsavedRetryMs ?? 1000;
  /**
   * How long a refused refresh looks for a newer set before it ends the session. Another process
   * may hold the set the provider issued with this refresh token, kept through a Redis outage
   * longer than the lock's TTL (which lapsed: this process took over with the spent token), and
   * write it at its next retry: two retry periods. Only a refused refresh waits.
   */
  const invalidGrantGraceMs = 2 * unsavedRetryMs;
  /**
   * How long a holder that finds another process's refresh of this version begun and never
   * written waits for it: that process reconnects (ioredis waits up to 2 s between tries,
   * redis/client.ts) and writes the set it kept at its next retry tick. Refreshing at once spent
   * the refresh token a second time, and a provider that detects reuse revoked the whole grant,
   * the kept set included: a Redis outage longer than the lock's TTL signed the user out.
   */
  const takeoverGraceMs = options.takeoverGraceMs ?? 5_000;
  const inFlight = new Map<string, Promise<VersionedTokens>>();
  const unsaved = createUnsavedRefreshes({
    write: (digest, seenVersion, next) => records.casTokens(digest, seenVersion, { v: seenVersion + 1, sealed: vault.seal(digest, next) }),
    retryMs: unsavedRetryMs,
    onSettled: (outcome, _digest, handle) => {
      if (outcome === 'given-up') options.onGivenUp?.(handle);
    },
    // A set Redis took too late, after its session ended: the same as one whose CAS found it gone.
    onOrphaned: (digest, next) => options.onOrphaned?.(digest, next),
  });

  /**
   * A set newer than `seen`, read now and then for up to `ms`; undefined if none came, 'gone' once
   * the record is. A kept set is written only at its process's retry tick, so a quarter of the
   * retry period finds it as surely as pollIntervalMs would, in fewer reads.
   */
  async function newerWithin(digest: string, seen: VersionedTokens, ms: number): Promise<VersionedTokens | 'gone' | undefined> {
    const deadline = performance.now() + ms;
    for (;;) {
      const latest = await readLatest(digest);
      if (!latest) return 'gone';
      if (latest.tokens && latest.version > seen.version) return latest;
      if (performance.now() >= deadline) return undefined;
      await sleep(Math.max(pollIntervalMs, unsavedRetryMs / 4));
    }
  }

  async function readLatest(digest: string): Promise<VersionedTokens | undefined> {
    const head = await records.peekTokens(digest);
    if (!head) return undefined;
    // A newer set an instance with a key this one lacks wrote is refused (openHere), not read as none.
    return { version: head.v, tokens: head.sealed ? vault.openHere(digest, head.sealed) : undefined };
  }

  function newerThan(latest: VersionedTokens | undefined, seen: VersionedTokens): VersionedTokens | undefined {
    if (!latest) throw sessionGone();
    if (latest.version === seen.version) return undefined;
    if (!latest.tokens) throw new GatewayError('login_required');
    return latest;
  }

  async function asHolder(
    digest: string,
    seen: VersionedTokens,
    refresh: RefreshFn,
    context: RefreshContext,
    held: { lock: Lock | undefined },
  ): Promise<VersionedTokens> {
    const latest = await readLatest(digest);
    const newer = newerThan(latest, seen);
    if (newer) {
      options.onRefresh?.('shared', context);
      return newer;
    }
    const current = latest?.tokens;
    const spends = context.needsRefreshToken !== false;
    if (!current || (spends && !current.refreshToken)) throw new GatewayError('login_required');
    if (spends) {
      const unwritten = await awaitUnwritten(digest, seen, context);
      if (unwritten) return unwritten;
    }

    let next: TokenSet;
    try {
      next = await refresh(current);
    } catch (err) {
      // Nothing the provider issued is kept anywhere: a later holder need not wait for it.
      if (spends) forget(digest);
      if (err instanceof GatewayError && err.code === 'login_required') {
        const moved = await newerWithin(digest, seen, invalidGrantGraceMs);
        if (moved !== undefined && moved !== 'gone') {
          options.onRefresh?.('shared', context);
          return moved;
        }
        options.onRefresh?.('invalid_grant', { ...context, error: err });
        // Ended meanwhile (a logout): nothing left to end, nor a second signed-out to announce.
        if (moved === 'gone') throw sessionGone();
        await endSession(digest);
      } else {
        options.onRefresh?.('failure', { ...context, error: err });
      }
      throw err;
    }
    const version = seen.version + 1;
    let result;
    try {
      result = await records.casTokens(digest, seen.version, { v: version, sealed: vault.seal(digest, next) });
    } catch (err) {
      // Redis failed after the provider answered: keep the new set rather than lose its rotated
      // refresh token, and hand it our lock (released once the set is written or given up).
      unsaved.keep(digest, seen.version, next, held.lock, context.handle);
      held.lock = undefined;
      throw err;
    }
    if (result === 'missing') {
      options.onOrphaned?.(digest, next);
      throw sessionGone();
    }
    if (result === 'stale') {
      // Only reachable if our lock lapsed (Redis failed its re-arming) and another process
      // refreshed meanwhile: its newer set wins, ours is discarded.
      const winner = newerThan(await readLatest(digest), seen);
      if (winner) return winner;
    }
    if (spends) forget(digest);
    if (result === 'written') void options.afterWrite?.(digest, seen.version, next);
    options.onRefresh?.('success', context);
    options.onRefreshed?.(digest);
    return { version, tokens: next };
  }

  /**
   * Before a refresh-token grant: the set another process got for this very version and has not
   * written (its note says so), if it comes within takeoverGraceMs; `seen` at once when it may
   * serve meanwhile. Otherwise this holder notes its own grant (for as long as it would keep the
   * set, should Redis fail it) and goes on.
   */
  async function awaitUnwritten(digest: string, seen: VersionedTokens, context: RefreshContext): Promise<VersionedTokens | undefined> {
    const note = keys.refreshing(digest);
    if ((await redis.get(note)) === String(seen.version)) {
      if (context.stillUsable?.()) return seen;
      const moved = await newerWithin(digest, seen, takeoverGraceMs);
      if (moved === 'gone') throw sessionGone();
      if (moved) {
        options.onRefresh?.('shared', context);
        return moved;
      }
    }
    await redis.set(note, String(seen.version), 'EX', UNSAVED_KEEP_MS / 1000);
    return undefined;
  }

  /** The grant's note goes once its set is written or nothing was issued (best effort: it expires). */
  function forget(digest: string): void {
    redis.del(keys.refreshing(digest)).catch(() => undefined);
  }

  async function coordinate(digest: string, seen: VersionedTokens, refresh: RefreshFn, context: RefreshContext): Promise<VersionedTokens> {
    // A set this process got from the provider but could not write: write it, ask nobody.
    const kept = await unsaved.flush(digest, seen.version);
    if (kept) {
      options.onRefresh?.('success', context);
      // Told like any refresh: written within a call, which has just slid the idle TTL. (The
      // background retry's write is not: it keeps the TTL, so it is no activity to announce.)
      options.onRefreshed?.(digest);
      return kept;
    }
    const deadline = performance.now() + maxWaitMs;
    for (;;) {
      const lock = await tryLock(redis, keys.refreshLock(digest), lockTtlMs);
      if (lock) {
        // Re-armed while the holder works: a DPoP refresh may outlive any fixed TTL worth having
        // (nonce read ≤ commandTimeoutMs, refresh grant ≤ the provider timeout of 10 s, and
        // openid-client's one use_dpop_nonce retry with a fresh 10 s: about 21 s > 15 s), and a
        // lapsed lock lets another process refresh with the same refresh token. The TTL only
        // bounds how long a holder that died blocks the others.
        const heartbeat = setInterval(() => void lock.extend(), lockTtlMs / 3);
        heartbeat.unref();
        // Released here unless asHolder handed it to a kept set (which re-arms it from then on).
        const held: { lock: Lock | undefined } = { lock };
        try {
          return await asHolder(digest, seen, refresh, context, held);
        } finally {
          clearInterval(heartbeat);
          await held.lock?.release();
        }
      }
      if (context.stillUsable?.()) return seen;
      await sleep(pollIntervalMs);
      const newer = newerThan(await readLatest(digest), seen);
      if (newer) {
        options.onRefresh?.('shared', context);
        return newer;
      }
      if (performance.now() > deadline) {
        throw new GatewayError('token_refresh_failed', { cause: new Error('timed out waiting for another refresh') });
      }
    }
  }

  return {
    refresh(digest, seen, refresh, context = {}) {
      const renewal = context.renewal ?? (context.needsRefreshToken === false ? 'exchange' : 'refresh');
      // A caller that may be served `seen` meanwhile shares only with callers that may too.
      const key = `${digest}:${seen.version}:${renewal}${context.stillUsable ? ':usable' : ''}`;
      const pending = inFlight.get(key);
      if (pending) return pending;
      const promise = coordinate(digest, seen, refresh, context)
        .catch((err: unknown) => {
          throw err instanceof GatewayError ? err : storeUnavailable(err);
        })
        .finally(() => inFlight.delete(key));
      inFlight.set(key, promise);
      return promise;
    },
    unsaved,
    get refreshing() {
      return inFlight.size;
    },
    async close() {
      const closeStarted = performance.now();
      if (inFlight.size > 0) await within(Promise.allSettled([...inFlight.values()]), closeWaitMs, []);
      // What is left of the same budget: a set kept through a Redis outage that ends meanwhile
      // is written yet.
      await unsaved.close(Math.max(0, closeStarted + closeWaitMs - performance.now()));
    },
  };
}
