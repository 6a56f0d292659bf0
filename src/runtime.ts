/**
 * Builds and owns the long-lived resources (Redis, provider configuration, logger, metrics,
 * stores) and closes them in order. Everything is created here and passed down explicitly.
 */
import type { DestinationStream } from 'pino';
import type { Config } from './config/load.js';
import { createSealer, type Sealer } from './crypto/seal.js';
import { createLogger, type Logger } from './observability/logger.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { annotateRefresh, traceRecords, traceRefresher } from './observability/traced-resources.js';
import { createTracing, type Tracing } from './observability/tracing.js';
import type { ProviderHandle } from './oidc/client.js';
import type { ClientTokens } from './proxy/client-token.js';
import { createRefusalCooldown, type RefusalCooldown } from './proxy/refusal-cooldown.js';
import { describeProviderError } from './oidc/errors.js';
import type { Revoker } from './oidc/revocation.js';
import { logRefresh } from './oidc/grant-log.js';
import { createProviderSide } from './provider-side.js';
import { closeRedis, pingRedis, type RedisClient } from './redis/client.js';
import { createReplicaAcks } from './redis/replica-acks.js';
import { atMostEvery, failureLogGate } from './clock.js';
import { connectConfiguredRedis } from './startup.js';
import { refuseUnsafeProcessEnvironment } from './process-env.js';
import { createRedisTransport } from './redis/pubsub.js';
import { createKeys, type Keys } from './redis/keys.js';
import { createLoginLimiter, type LoginLimiter } from './redis/rate-limit.js';
import { createDpopNonces, type DpopNonces } from './redis/dpop-nonces.js';
import { createSessionEvents, type EndReason, type SessionEvents } from './session/events.js';
import { createUnreplicatedWrites } from './session/unreplicated-writes.js';
import { createHeldSessions, type HeldSessions } from './session/held.js';
import { createSessionRecords, createViewCache, type SessionRecords } from './session/records.js';
import { createRefreshCoordinator, REFRESH_CLOSE_WAIT_MS, type RefreshCoordinator } from './session/refresh.js';
import type { TokenSet } from './session/tokens.js';
import { createSessionRegistry, ENDED_MEMORY_SECONDS, type SessionRegistry } from './session/registry.js';
import { createRevocationOutbox } from './session/revocation-outbox.js';
import type { EndedRevocations } from './session/ended-revocations.js';
import { RedisSessionStore } from './session/store.js';
import { createTransactions, TRANSACTION_TTL_SECONDS, type Transactions } from './session/transactions.js';
import { createOpenedCache, createTokenVault, type TokenVault } from './session/vault.js';

export { StartupError } from './startup.js';

export interface RuntimeOptions {
  /** Where log lines go (tests collect them); default: stdout, asynchronously. */
  logDestination?: DestinationStream;
  logger?: Logger;
  clock?: () => number;
  /** Collect Node's default process metrics (off in tests: several runtimes share a process). */
  defaultMetrics?: boolean;
  /** A ready client to use instead of connecting to config.redis (the demo's in-memory fallback). */
  redis?: RedisClient;
  /** Provider discovery retry backoff (default 500 ms doubling to 30 s). */
  discoveryRetry?: { initialMs: number; maxMs: number };
}

export interface Runtime {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  /** OpenTelemetry traces; `enabled` false (and no per-call work anywhere) unless configured. */
  tracing: Tracing;
  redis: RedisClient;
  keys: Keys;
  sealer: Sealer;
  vault: TokenVault;
  records: SessionRecords;
  store: RedisSessionStore;
  transactions: Transactions;
  registry: SessionRegistry;
  refresher: RefreshCoordinator;
  /** The session-event bus across instances (issue 16). */
  events: SessionEvents;
  /** The sessions this instance holds streams open for, closed when they end. */
  held: HeldSessions;
  provider: ProviderHandle;
  /** Revokes ended sessions' tokens (oidc/revocation.ts); close() waits for what it has under way. */
  revoke: Revoker;
  /** Revokes what an end took, journaled until heard, and sweeps what others left (session/ended-revocations.ts). */
  revocations: EndedRevocations;
  loginLimiter: LoginLimiter;
  clientTokens: ClientTokens;
  /** How often a token an upstream refused may be renewed, shared by all instances (refusal-cooldown.ts). */
  refusals: RefusalCooldown;
  /** Latest DPoP-Nonce per server, shared by every instance (redis/dpop-nonces.ts). */
  dpopNonces: DpopNonces;
  clock: () => number;
  redisReady(): Promise<boolean>;
  /** Registers cleanup for something built on top of the runtime (e.g. the app's upstream agents). */
  onClose(cleanup: () => void | Promise<void>): void;
  close(): Promise<void>;
}

export async function createRuntime(config: Config, options: RuntimeOptions = {}): Promise<Runtime> {
  refuseUnsafeProcessEnvironment();
  const clock = options.clock ?? Date.now;
  const tracing = await createTracing(config.observability.tracing);
  const logger =
    options.logger ??
    createLogger({
      level: config.log.level,
      ...(options.logDestination ? { destination: options.logDestination } : {}),
      // Each line says which trace it belongs to (the active span's ids), when tracing is on.
      ...(tracing.enabled ? { mixin: () => tracing.activeIds() ?? {} } : {}),
    });
  const metrics = createMetrics({ defaultMetrics: options.defaultMetrics ?? true });

  const redis = options.redis ?? (await connectConfiguredRedis(config, logger, metrics, clock));

  const keys = createKeys(config.redis.keyPrefix);
  const sealer = createSealer(config.session.encryptionKeys);
  const openedCache = createOpenedCache();
  const viewCache = createViewCache();
  metrics.measureCaches({ views: () => viewCache.bytes, tokens: () => openedCache.bytes });
  const vault = createTokenVault(sealer, openedCache);
  const untracedRecords = createSessionRecords({
    viewCache,
    redis,
    keys,
    sealer,
    idleTimeoutSeconds: config.session.idleTimeoutSeconds,
    absoluteTimeoutSeconds: config.session.absoluteTimeoutSeconds,
    clock,
    observe: metrics.observeRedis,
  });
  const records = tracing.enabled ? traceRecords(untracedRecords, tracing) : untracedRecords;
  const transactions = createTransactions(redis, keys, sealer, { clock, observe: metrics.observeRedis });
  metrics.countActiveLoginTransactions(() => transactions.active());
  const events = createSessionEvents({
    // The demo's in-process store is shared with no other instance: local listeners only.
    ...(options.redis
      ? {}
      : {
          transport: createRedisTransport(redis, keys.endedChannel(), {
            onError: () => metrics.redisErrors.inc({ kind: 'connection' }),
            onRenewed: () => logger.warn({ event: 'session_events_resubscribed' }, 'the session-event subscription stopped hearing (its own probe did not come back); subscribed again'),
          }),
        }),
    clock,
    onPublished: (kind) => metrics.sessionEventsPublished.inc({ kind }),
    onReceived: (kind) => metrics.sessionEventsReceived.inc({ kind }),
    onMalformed: () => metrics.sessionEventsReceived.inc({ kind: 'malformed' }),
    onPublishFailed: (err) => logger.warn({ event: 'session_event_publish_failed', err }, 'a session event did not reach Redis (a signed-out one is sent again once it does)'),
  });
  const held = createHeldSessions({
    events,
    idleTimeoutSeconds: config.session.idleTimeoutSeconds,
    absoluteTimeoutSeconds: config.session.absoluteTimeoutSeconds,
    remainingMs: (d) => records.remainingMs(d),
    exist: (digests) => records.exist(digests),
    clock,
    onCheckFailed: (err) => logger.warn({ event: 'held_session_check_failed', err }, 'could not check held sessions; trying again later (said once until a check succeeds)'),
  });
  events.onReconnect(() => {
    logger.info({ event: 'session_events_reconnected', held: held.digests().length }, 're-checking held sessions after the bus came back');
    void held.recheck();
  });
  // Sentinel only (createReplicaAcks): a Cluster's writes go to many nodes (not covered: docs/operations.md).
  const mayLogUnreplicated = atMostEvery(10_000, clock);
  const replicaAcks = createReplicaAcks(redis, keys.replicationMark());
  const unreplicated = replicaAcks
    ? createUnreplicatedWrites({
        acks: replicaAcks,
        waitMs: Math.min(500, Math.floor(config.redis.commandTimeoutMs / 2)),
        onUnconfirmed: () => {
          if (mayLogUnreplicated()) {
            logger.warn({ event: 'session_write_unreplicated' }, 'no Redis replica acknowledged a session end or token set in time; it is written again after a failover (said once per 10 s)');
          }
        },
      })
    : undefined;
  const outbox = createRevocationOutbox({
    redis,
    keys,
    sealer,
    leaseMs: config.session.revocationRetrySeconds * 1000,
    keptMs: ENDED_MEMORY_SECONDS * 1000,
    observe: metrics.observeRedis,
  });
  // The journal's Redis failures (an entry not written; a sweep that could not read or release):
  // counted, and said once per 10 s per kind.
  const mayLogJournal = failureLogGate(clock);
  const journalFailed = (event: string, message: string) => (err: unknown) => {
    metrics.redisErrors.inc({ kind: 'command' });
    const suppressed = mayLogJournal(event);
    if (suppressed !== undefined) logger.warn({ event, reason: describeProviderError(err), suppressed }, `${message} (said once per 10 s)`);
  };
  const registry = createSessionRegistry({
    redis,
    keys,
    records,
    outbox,
    idleTimeoutSeconds: config.session.idleTimeoutSeconds,
    absoluteTimeoutSeconds: config.session.absoluteTimeoutSeconds,
    clock,
    ...(unreplicated
      ? { afterEnd: (d: string, reason: EndReason, revokes: boolean) => unreplicated.confirm(`end ${d}`, () => registry.end(d, reason, { revokes, again: true })) }
      : {}),
    onEnded: (d, reason) => {
      vault.forget(d);
      events.publish(d, { type: 'signed-out', reason });
    },
    onIndexError: (err) => {
      metrics.redisErrors.inc({ kind: 'command' });
      logger.warn({ event: 'session_index_cleanup_failed', reason: describeProviderError(err) }, 'an ended session stays in its index until a reader drops it');
    },
    onJournalError: journalFailed('revocation_journal_failed', 'an ended session could not be journaled for revocation; it is revoked once, not retried'),
  });
  const coordinator = createRefreshCoordinator({
    redis,
    keys,
    records,
    vault,
    endSession: async (d) => {
      // The provider refused the refresh: the grant is gone, and there is nothing to revoke.
      await registry.end(d, 'revoked', { keep: false });
    },
    onRefreshed: (d) => events.publish(d, { type: 'tokens-refreshed' }),
    ...(unreplicated
      ? {
          afterWrite: (d: string, seen: number, next: TokenSet) =>
            // Over any earlier version: two refreshes in one gap leave only the later remembered,
            // and the promoted replica may hold the set before the first (found by review).
            unreplicated.confirm(`tokens ${d}`, () => records.raiseTokens(d, { v: seen + 1, sealed: vault.seal(d, next) })),
        }
      : {}),
    // Best effort, in the background: the call that refreshed is answered login_required now.
    // Tracked by the revoker from the start (its Redis read included), so shutdown waits for it.
    onOrphaned: (d, tokens) => revoke.track(revokeOrphan(d, tokens)),
    onGivenUp: (handle) =>
      logger.error(
        { event: 'refresh_set_given_up', ...(handle ? { session: handle } : {}) },
        'a token set the provider issued was never written to Redis: its session will be signed out at its next refresh',
      ),
    onRefresh: (outcome, report) => {
      metrics.refreshes.inc({ outcome });
      annotateRefresh(tracing, outcome);
      logRefresh(logger, outcome, report);
    },
  });
  const dpopNonces = createDpopNonces({
    redis,
    keys,
    clock,
    onError: () => metrics.redisErrors.inc({ kind: 'command' }),
  });
  const refresher = tracing.enabled ? traceRefresher(coordinator, tracing) : coordinator;
  const refusals = createRefusalCooldown({ redis, keys });
  const { provider, revoke, revocations, clientTokens } = createProviderSide(config, {
    tracing,
    clock,
    logger,
    metrics,
    redis,
    keys,
    sealer,
    vault,
    outbox,
    onOutboxError: journalFailed('revocation_outbox_failed', 'the revocation outbox could not be read or released; it is tried again at the next sweep'),
    refusals,
    dpopNonces,
    ...(options.discoveryRetry ? { discoveryRetry: options.discoveryRetry } : {}),
  });
  async function revokeOrphan(sessionDigest: string, tokens: TokenSet): Promise<void> {
    try {
      const revoked = await registry.endedWithRevocation(sessionDigest);
      logger.info({ event: 'refresh_orphaned', revoked }, 'a refresh was answered after its session ended');
      if (revoked) await revoke(tokens);
    } catch {
      // Redis could not say how the session ended: the tokens are left to expire, as a
      // session's end revokes nothing it cannot read either.
      metrics.redisErrors.inc({ kind: 'command' });
    }
  }
  metrics.watchDependencies({ redis: () => pingRedis(redis), provider: () => provider.isReady() });

  const cleanups: Array<() => void | Promise<void>> = [];
  return {
    config,
    logger,
    metrics,
    tracing,
    redis,
    keys,
    sealer,
    vault,
    records,
    store: new RedisSessionStore(records),
    transactions,
    registry,
    refresher,
    events,
    held,
    provider,
    revoke,
    revocations,
    loginLimiter: createLoginLimiter(redis, keys, config.rateLimit.loginPerMinute, TRANSACTION_TTL_SECONDS),
    refusals,
    dpopNonces,
    clientTokens,
    clock,
    redisReady: () => pingRedis(redis),
    onClose: (cleanup) => void cleanups.push(cleanup),
    async close() {
      for (const cleanup of cleanups.splice(0)) await cleanup();
      // Before Redis is closed: refreshes under way are waited for, token sets still waiting for
      // Redis are written again until the same bound (their rotated refresh token is the only
      // valid one), and their refresh locks are released.
      if (coordinator.refreshing > 0) logger.info({ event: 'shutdown_refreshes', refreshing: coordinator.refreshing }, 'waiting for the refreshes under way');
      if (revoke.underWay() > 0) logger.info({ event: 'shutdown_revocations', revoking: revoke.underWay() }, 'waiting for the revocations under way');
      // In one bound: the refreshes first, as their last writes may orphan a set whose
      // revocation (with its Redis read) then joins the ones under way.
      const deadline = performance.now() + REFRESH_CLOSE_WAIT_MS;
      revocations.stop();
      await coordinator.close();
      await revoke.settle(deadline - performance.now());
      held.close();
      unreplicated?.close();
      replicaAcks?.close();
      await events.close();
      provider.close();
      await closeRedis(redis);
      // Last: the spans of everything closed above are exported before the process goes.
      await tracing.shutdown();
      logger.flush();
    },
  };
}
