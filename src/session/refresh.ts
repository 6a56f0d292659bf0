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
import type { RedisClient } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { sleep, tryLock, type Lock } from '../redis/lock.js';
import { sessionGone } from './gone.js';
import { storeUnavailable } from '../redis/errors.js';
import type { SessionRecords } from './records.js';
import type { TokenVault } from './vault.js';
import type { TokenSet, VersionedTokens } from './tokens.js';
import { createUnsavedRefreshes, type UnsavedRefreshes } from './unsaved-refreshes.js';

export type RefreshFn = (current: TokenSet) => Promise<TokenSet>;

export type RefreshOutcome = 'success' | 'invalid_grant' | 'failure' | 'shared';

/** Who is refreshing, for the log line: the session's public handle (never the digest or cookie). */
export interface RefreshContext {
  handle?: string;
  /**
   * False for a renewal that does not use the refresh token (a token exchange, RFC 8693): it
   * runs without one. Default true: no refresh token means login_required.
   */
  needsRefreshToken?: boolean;
  /**
   * Which renewal this is (the sign-in token's refresh, a resource's, a route's exchange): only
   * calls of the same renewal share one in this process, so that one's failure (an exchange's
   * 403 insufficient_scope) is never handed to another. Default: `exchange` when
   * needsRefreshToken is false, else `refresh`.
   */
  renewal?: string;
}

export interface RefreshReport extends RefreshContext {
  /** Why a refresh failed (`invalid_grant` or `failure`): a GatewayError whose cause is the provider's answer. */
  error?: unknown;
}

/** How long close() waits for refreshes under way, by default (the supervisor allows for it). */
export const REFRESH_CLOSE_WAIT_MS = 15_000;

export interface RefreshCoordinatorOptions {
  redis: RedisClient;
  keys: Keys;
  records: SessionRecords;
  vault: TokenVault;
  /** Ends a session whose grant is gone (invalid_grant): record and indexes. */
  endSession: (digest: string) => Promise<void>;
  /** How long the lock lives if its holder dies (a live holder re-arms it every third of it). */
  lockTtlMs?: number;
  /** How long a waiter polls for another process's result before giving up. */
  maxWaitMs?: number;
  pollIntervalMs?: number;
  /** How often a token set Redis did not take is retried (default 1 s). */
  unsavedRetryMs?: number;
  /**
   * How long close() waits for refreshes under way (default 15 s: the provider timeout and a
   * Redis command). A provider answer that comes later is lost with its rotated refresh token.
   */
  closeWaitMs?: number;
  /** Called once per coordinated refresh (not per waiting request); never given a token. */
  onRefresh?: (outcome: RefreshOutcome, report: RefreshReport) => void;
  /** A new token set was stored for this session (the session-event bus tells other instances). */
  onRefreshed?: (digest: string) => void;
  /**
   * The provider issued `tokens` for a session that ended while it answered: nothing holds
   * them. When that end revoked the set it found (a logout), the owner revokes these too (a
   * provider may revoke tokens one by one, not by grant); not after a new sign-in of the same
   * browser, whose session may hold the same grant.
   */
  onOrphaned?: (digest: string, tokens: TokenSet) => void;
}

export interface RefreshCoordinator {
  /**
   * Returns a token set newer than `seen` (refreshing if nobody else has), or throws
   * login_required / token_refresh_failed / session_store_unavailable. A caller that needs
   * something the returned set lacks (e.g. a fresh per-resource token) calls again with it.
   */
  refresh(digest: string, seen: VersionedTokens, refresh: RefreshFn, context?: RefreshContext): Promise<VersionedTokens>;
}

/** The coordinator as its owner (the runtime) holds it. */
export interface OwnedRefreshCoordinator extends RefreshCoordinator {
  /** Token sets issued by the provider and still waiting for Redis. */
  readonly unsaved: Pick<UnsavedRefreshes, 'size'>;
  /** Refreshes under way in this process. */
  readonly refreshing: number;
  /**
   * Waits (bounded) for the refreshes under way, whose provider answer holds the only valid
   * refresh token once it comes, then writes the kept sets one last time and releases their
   * locks: call it before Redis is closed.
   */
  close(): Promise<void>;
}

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
  const inFlight = new Map<string, Promise<VersionedTokens>>();
  const unsaved = createUnsavedRefreshes({
    write: (digest, seenVersion, next) => records.casTokens(digest, seenVersion, { v: seenVersion + 1, sealed: vault.seal(digest, next) }),
    retryMs: unsavedRetryMs,
    // A set Redis took too late, after its session ended: the same as one whose CAS found it gone.
    onOrphaned: (digest, next) => options.onOrphaned?.(digest, next),
  });

  /**
   * A set newer than `seen`, read now and then for up to `ms`; undefined if none came, 'gone' once
   * the record is. A kept set is written only at its process's retry tick, so a quarter of the
   * retry period finds it as surely as pollIntervalMs would, in fewer reads.
   */
  async function newerWithin(digest: string, seen: VersionedTokens, ms: number): Promise<VersionedTokens | 'gone' | undefined> {
    const deadline = Date.now() + ms;
    for (;;) {
      const latest = await readLatest(digest);
      if (!latest) return 'gone';
      if (latest.tokens && latest.version > seen.version) return latest;
      if (Date.now() >= deadline) return undefined;
      await sleep(Math.max(pollIntervalMs, unsavedRetryMs / 4));
    }
  }

  async function readLatest(digest: string): Promise<VersionedTokens | undefined> {
    const head = await records.peekTokens(digest);
    if (!head) return undefined;
    return { version: head.v, tokens: head.sealed ? vault.open(digest, head.sealed) : undefined };
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
    if (!current || (context.needsRefreshToken !== false && !current.refreshToken)) throw new GatewayError('login_required');

    let next: TokenSet;
    try {
      next = await refresh(current);
    } catch (err) {
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
      unsaved.keep(digest, seen.version, next, held.lock);
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
    options.onRefresh?.('success', context);
    options.onRefreshed?.(digest);
    return { version, tokens: next };
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
    const deadline = Date.now() + maxWaitMs;
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
      await sleep(pollIntervalMs);
      const newer = newerThan(await readLatest(digest), seen);
      if (newer) {
        options.onRefresh?.('shared', context);
        return newer;
      }
      if (Date.now() > deadline) {
        throw new GatewayError('token_refresh_failed', { cause: new Error('timed out waiting for another refresh') });
      }
    }
  }

  return {
    refresh(digest, seen, refresh, context = {}) {
      const renewal = context.renewal ?? (context.needsRefreshToken === false ? 'exchange' : 'refresh');
      const key = `${digest}:${seen.version}:${renewal}`;
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
      if (inFlight.size > 0) {
        let timer: NodeJS.Timeout | undefined;
        const bound = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, closeWaitMs);
        });
        await Promise.race([Promise.allSettled([...inFlight.values()]), bound]);
        clearTimeout(timer);
      }
      await unsaved.close();
    },
  };
}
