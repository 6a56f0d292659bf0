/**
 * The runtime's provider side: the provider's handle (discovery retried and logged), the
 * revoker of ended sessions' tokens and its journal's sweeps, and the client-credentials token
 * source of `auth: client` routes. Built by runtime.ts, which owns and closes them.
 */
import type { Config } from './config/load.js';
import type { Sealer } from './crypto/seal.js';
import type { Logger } from './observability/logger.js';
import type { Metrics } from './observability/metrics.js';
import { annotateClientFetch, traceClientTokens } from './observability/traced-resources.js';
import type { Tracing } from './observability/tracing.js';
import { pushedRequestMismatch } from './oidc/authorization-request.js';
import { createProviderHandle, type ProviderHandle } from './oidc/client.js';
import { describeProviderError } from './oidc/errors.js';
import { logClientCredentialsFailure } from './oidc/grant-log.js';
import { clientCredentials } from './oidc/grants.js';
import { createRevoker, type Revoker } from './oidc/revocation.js';
import { createClientTokens, type ClientTokens } from './proxy/client-token.js';
import type { RefusalCooldown } from './proxy/refusal-cooldown.js';
import type { RedisClient } from './redis/client.js';
import type { DpopNonces } from './redis/dpop-nonces.js';
import type { Keys } from './redis/keys.js';
import { createEndedRevocations, type EndedRevocations } from './session/ended-revocations.js';
import type { RevocationOutbox } from './session/revocation-outbox.js';
import type { TokenVault } from './session/vault.js';

export interface ProviderSideDeps {
  tracing: Tracing;
  clock: () => number;
  logger: Logger;
  metrics: Metrics;
  redis: RedisClient;
  keys: Keys;
  sealer: Sealer;
  vault: TokenVault;
  /** The revocations ends owe (session/revocation-outbox.ts), swept from here. */
  outbox: RevocationOutbox;
  /** A sweep's Redis command failed (counted and logged by the runtime, as the journal's other failures). */
  onOutboxError: (err: unknown) => void;
  refusals: RefusalCooldown;
  dpopNonces: DpopNonces;
  discoveryRetry?: { initialMs: number; maxMs: number };
}

export interface ProviderSide {
  provider: ProviderHandle;
  revoke: Revoker;
  /** Revokes what an end took, journaled until heard, and sweeps what others left (started). */
  revocations: EndedRevocations;
  clientTokens: ClientTokens;
}

export function createProviderSide(config: Config, deps: ProviderSideDeps): ProviderSide {
  const { tracing, clock, logger, metrics, dpopNonces } = deps;
  const provider = createProviderHandle(config.oidc, {
    tracing,
    clock,
    requireDpop: config.derived.dpop,
    ...(config.derived.dpop ? { onDpopNonce: (origin: string, nonce: string) => dpopNonces.put(origin, nonce) } : {}),
    ...(deps.discoveryRetry ? { retry: deps.discoveryRetry } : {}),
    onDiscoveryError(err, attempt, retryInMs) {
      logger.warn(
        { event: 'discovery_failed', issuer: config.oidc.issuer, attempt, retryInMs, reason: describeProviderError(err) },
        'provider discovery failed; retrying',
      );
    },
    onReady(state) {
      logger.info({ event: 'discovery_ok', issuer: state.metadata.issuer }, 'provider metadata loaded');
      const par = pushedRequestMismatch(config.oidc.pushedAuthorizationRequests, state.metadata);
      if (par) logger.error({ event: 'par_mismatch', mode: config.oidc.pushedAuthorizationRequests }, `${par} Every sign-in will answer 503.`);
    },
  });
  const revoke = createRevoker(provider, logger, { onOutcome: (outcome) => metrics.tokenRevocations.inc({ outcome }) });
  const revocations = createEndedRevocations({
    outbox: deps.outbox,
    vault: deps.vault,
    sealer: deps.sealer,
    revoke,
    ready: () => provider.isReady(),
    // A quarter of the retry interval: what is owed is taken up soon after the interval passes.
    sweepIntervalMs: Math.min(15_000, Math.max(250, (config.session.revocationRetrySeconds * 1000) / 4)),
    onResumed: (count) => logger.info({ event: 'revocation_resumed', sessions: count }, 'revocations an earlier try left owed were taken up'),
    onUnreached(count) {
      metrics.revocationsAbandoned.inc(count);
      logger.error(
        { event: 'revocation_unreached', sessions: count },
        "ended sessions' revocations were owed until their kept copies expired, with no sweep taking them up; their tokens stay valid at the provider until they expire",
      );
    },
    onAbandoned(handle) {
      metrics.revocationsAbandoned.inc();
      logger.error(
        { event: 'revocation_abandoned', ...(handle ? { session: handle } : {}) },
        "an ended session's last revocation try was not heard; its tokens stay valid at the provider until they expire",
      );
    },
    onError: deps.onOutboxError,
  });
  revocations.start();
  const clientTokens = createClientTokens({
    redis: deps.redis,
    keys: deps.keys,
    sealer: deps.sealer,
    cooldown: deps.refusals,
    skewSeconds: config.tokens.refreshSkewSeconds,
    clock,
    fetch: (request) => {
      annotateClientFetch(tracing);
      return clientCredentials(
        provider.get(),
        { ...(request.scopes.length ? { scope: request.scopes.join(' ') } : {}), ...(request.resource ? { resource: request.resource } : {}) },
        clock,
      ).catch((err: unknown) => {
        logClientCredentialsFailure(logger, err);
        throw err;
      });
    },
    onFetch: (outcome) => metrics.clientCredentials.inc({ outcome }),
  });
  return { provider, revoke, revocations, clientTokens: tracing.enabled ? traceClientTokens(clientTokens, tracing) : clientTokens };
}
