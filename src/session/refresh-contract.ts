/**
 * What the refresh coordinator (refresh.ts) is given and what it promises: its options, the
 * context a caller passes, and the coordinator as callers and as its owner hold it.
 */
import type { RedisClient } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import type { SessionRecords } from './records.js';
import type { TokenVault } from './vault.js';
import type { TokenSet, VersionedTokens } from './tokens.js';
import type { UnsavedRefreshes } from './unsaved-refreshes.js';

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
  /**
   * Whether the caller's token, due for renewal, has not expired yet: while another process
   * holds the lock (renewing it, or dead until the lock lapses), `seen` is returned at once
   * instead of waiting for that renewal (up to maxWaitMs, then a 502).
   */
  stillUsable?: () => boolean;
}

export interface RefreshReport extends RefreshContext {
  /** Why a refresh failed (`invalid_grant` or `failure`): a GatewayError whose cause is the provider's answer. */
  error?: unknown;
}

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
   * How long a holder that finds another process's refresh of the same version begun and never
   * written waits for that set before refreshing itself (default 5 s).
   */
  takeoverGraceMs?: number;
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
   * After a new set is written over `seenVersion`, not waited for (a Sentinel master's
   * replicas' acknowledgement, unreplicated-writes.ts).
   */
  afterWrite?: (digest: string, seenVersion: number, next: TokenSet) => Promise<void>;
  /**
   * The provider issued `tokens` for a session that ended while it answered: nothing holds
   * them. When that end revoked the set it found (a logout), the owner revokes these too (a
   * provider may revoke tokens one by one, not by grant); not after a new sign-in of the same
   * browser, whose session may hold the same grant.
   */
  onOrphaned?: (digest: string, tokens: TokenSet) => void;
  /**
   * A token set the provider issued was never written (Redis failed it for as long as it was
   * kept, or until the process stopped): its session holds a spent refresh token now. `handle`
   * is the session's public handle (RefreshContext), so that an operator can tell its user.
   */
  onGivenUp?: (handle: string | undefined) => void;
}

export interface RefreshCoordinator {
  /**
   * Returns a token set newer than `seen` (refreshing if nobody else has), or `seen` itself while
   * another process renews and `context.stillUsable` says it serves meanwhile; or throws
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
