/**
 * Prometheus metrics (prom-client), one registry per runtime. Labels carry only configured
 * names (route paths from the config, endpoint names, outcomes): never a URL, user or token.
 */
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { LeanCounter, LeanHistogram } from './lean-series.js';

/** The Prometheus text of a scrape: this process's registry, or the sum over cluster workers. */
export type MetricsSource = () => Promise<{ contentType: string; body: string }>;

export interface Metrics {
  registry: Registry;
  /** This process's own metrics. */
  source: MetricsSource;
  /** Recorded on every call: lean series (lean-series.ts), exposed through the same registry. */
  requests: LeanCounter<'route' | 'method' | 'status'>;
  latency: LeanHistogram<'route'>;
  refreshes: Counter<'outcome'>;
  clientCredentials: Counter<'outcome'>;
  redisErrors: Counter<'kind'>;
  redisLatency: LeanHistogram<'operation'>;
  loginTransactions: Counter<'outcome'>;
  /** Where the active-login-transactions gauge reads its value at scrape time. */
  countActiveLoginTransactions(source: () => Promise<number>): void;
  /**
   * Checks read at scrape time into `bff_dependency_up{dependency}` (1 usable, 0 not): what
   * /readyz says, as a series an alert can watch (e.g. Redis down on every instance).
   */
  watchDependencies(checks: Record<string, () => Promise<boolean> | boolean>): void;
  /** Where `bff_session_cache_bytes{cache}` reads each per-process cache's estimated size at scrape time. */
  measureCaches(sizes: Record<string, () => number>): void;
  /** Records a Redis operation: its latency by operation, and a command error when it failed. */
  observeRedis(operation: string, seconds: number, failed: boolean): void;
  upstreamErrors: Counter<'route' | 'kind'>;
  /** 1 while a Redis the gateway writes to may evict its keys (redis/eviction.ts), else 0. */
  redisMayEvict: Gauge;
  /** Revocations of ended sessions' tokens, by outcome (oidc/revocation.ts). */
  tokenRevocations: Counter<'outcome'>;
  /** Ended sessions whose revocation the journal gave up on, or never reached (session/ended-revocations.ts). */
  revocationsAbandoned: Counter;
  /** Back-channel logouts received, by outcome (http/session-routes.ts). */
  backchannelLogouts: Counter<'outcome'>;
  openWebSockets: Gauge<'route'>;
  /** GET /auth/events streams open now. */
  openEventStreams: Gauge;
  /** Proxied streaming responses held open now, tracked for closing when their session ends. */
  openProxiedStreams: Gauge<'route'>;
  sessionEventsPublished: Counter<'kind'>;
  sessionEventsReceived: Counter<'kind'>;
  /** Seconds from a session's end to the close of each stream it had open here, by what was closed. */
  sessionEndToClose: Histogram<'stream'>;
}

/** Known label values of the live-session metrics (exported at 0). */
export const SESSION_EVENT_KINDS = ['signed-out', 'step-up-required', 'tokens-refreshed'] as const;
export const CLOSED_STREAM_KINDS = ['websocket', 'proxied_stream', 'event_stream'] as const;

export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'bff_' });
  const registers = [registry];
  let activeSource: (() => Promise<number>) | undefined;
  new Gauge({
    name: 'bff_login_transactions_active',
    // Every worker reads the same number from Redis: summing them would multiply it.
    aggregator: 'max',
    help: 'Login transactions in progress (started, not yet returned from the provider, not expired), across all instances: read from Redis at scrape time, so aggregate with max(), not sum().',
    registers,
    async collect() {
      if (!activeSource) return;
      try {
        this.set(await activeSource());
      } catch {
        // Redis unavailable: the scrape still answers, without a fresh value (the failure is counted).
      }
    },
  });
  let dependencies: Record<string, () => Promise<boolean> | boolean> = {};
  new Gauge({
    name: 'bff_dependency_up',
    // Down in any worker is down.
    aggregator: 'min',
    help: 'Whether a dependency answers, checked at scrape time (1 yes, 0 no): redis (PING), provider (metadata loaded).',
    labelNames: ['dependency'],
    registers,
    async collect() {
      await Promise.all(
        Object.entries(dependencies).map(async ([name, check]) => {
          const up = await Promise.resolve()
            .then(check)
            .catch(() => false);
          this.set({ dependency: name }, up ? 1 : 0);
        }),
      );
    },
  });
  let caches: Record<string, () => number> = {};
  new Gauge({
    name: 'bff_session_cache_bytes',
    help: "Estimated bytes held by this process's caches of sessions read (views: parsed records; tokens: opened token sets), each bounded (README, Resource bounds).",
    labelNames: ['cache'],
    registers,
    collect() {
      for (const [name, size] of Object.entries(caches)) this.set({ cache: name }, size());
    },
  });
  const redisLatency = new LeanHistogram(
    'bff_redis_command_duration_seconds',
    'Time of Redis operations, by operation (session_read is the one behind every proxied call), failures included.',
    ['operation'],
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers,
  );
  const redisErrors = new Counter({
    name: 'bff_redis_errors_total',
    help: 'Redis failures: connection errors and failed commands.',
    labelNames: ['kind'],
    registers,
  });
  // Label children bound once per operation: this runs on every proxied call.
  const latencyByOperation = new Map<string, ReturnType<typeof redisLatency.labels>>();
  const commandErrors = redisErrors.labels('command');
  const metrics: Metrics = {
    source: async () => ({ contentType: registry.contentType, body: await registry.metrics() }),
    countActiveLoginTransactions(source) {
      activeSource = source;
    },
    watchDependencies(checks) {
      dependencies = checks;
    },
    measureCaches(sizes) {
      caches = sizes;
    },
    observeRedis(operation, seconds, failed) {
      let child = latencyByOperation.get(operation);
      if (!child) latencyByOperation.set(operation, (child = redisLatency.labels(operation)));
      child.observe(seconds);
      if (failed) commandErrors.inc();
    },
    redisLatency,
    redisErrors,
    registry,
    requests: new LeanCounter(
      'bff_http_requests_total',
      'Requests answered, by configured route (or gateway endpoint), method and status.',
      ['route', 'method', 'status'],
      registers,
    ),
    latency: new LeanHistogram(
      'bff_http_request_duration_seconds',
      'Time from the request to the end of its response (for a stream: its whole length), by configured route (or gateway endpoint).',
      ['route'],
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    ),
    refreshes: new Counter({
      name: 'bff_token_refresh_total',
      help: 'User token refreshes: success, shared (another request or process refreshed), invalid_grant, failure.',
      labelNames: ['outcome'],
      registers,
    }),
    clientCredentials: new Counter({
      name: 'bff_client_credentials_fetch_total',
      help: 'Client-credentials token requests to the provider, by outcome.',
      labelNames: ['outcome'],
      registers,
    }),
    loginTransactions: new Counter({
      name: 'bff_login_transactions_total',
      help: 'Login transactions started and how they ended.',
      labelNames: ['outcome'],
      registers,
    }),
    upstreamErrors: new Counter({
      name: 'bff_upstream_errors_total',
      help: 'Proxied calls that failed before an upstream answer (unreachable, timeout).',
      labelNames: ['route', 'kind'],
      registers,
    }),
    backchannelLogouts: new Counter({
      name: 'bff_backchannel_logouts_total',
      help: 'Back-channel logout tokens received, by outcome: ended (taken), replayed (its jti already taken), refused (signed by the provider, its claims refused: clock skew, audience), invalid (unsigned, forged, malformed).',
      labelNames: ['outcome'],
      registers,
    }),
    tokenRevocations: new Counter({
      name: 'bff_token_revocations_total',
      help: "Revocations (RFC 7009) of ended sessions' tokens, by outcome: success, failure (a token not revoked, or no provider metadata), dropped (past the queue).",
      labelNames: ['outcome'],
      registers,
    }),
    revocationsAbandoned: new Counter({
      name: 'bff_token_revocations_abandoned_total',
      help: "Ended sessions whose revocation was given up: the last try before the journal's kept copy expired was not heard (failure or dropped), or no sweep reached it before then; their tokens stay valid at the provider until they expire.",
      registers,
    }),
    redisMayEvict: new Gauge({
      name: 'bff_redis_may_evict',
      // Any worker's Redis evicting is evicting.
      aggregator: 'max',
      help: 'Whether a Redis the gateway writes to has maxmemory set with a maxmemory-policy other than noeviction (1) or not (0), read at each connection: evicted keys can undo back-channel logouts (README, Redis).',
      registers,
    }),
    openWebSockets: new Gauge({
      name: 'bff_websockets_open',
      help: 'Proxied WebSocket connections currently open.',
      labelNames: ['route'],
      registers,
    }),
    openEventStreams: new Gauge({
      name: 'bff_event_streams_open',
      help: 'GET /auth/events streams currently open.',
      registers,
    }),
    openProxiedStreams: new Gauge({
      name: 'bff_proxied_streams_open',
      help: 'Proxied streaming responses (event streams, bodies without Content-Length or of 1 MiB and more) currently open, closed when their session ends.',
      labelNames: ['route'],
      registers,
    }),
    sessionEventsPublished: new Counter({
      name: 'bff_session_events_published_total',
      help: 'Session events this instance published on the bus, by kind.',
      labelNames: ['kind'],
      registers,
    }),
    sessionEventsReceived: new Counter({
      name: 'bff_session_events_received_total',
      help: 'Session events this instance received from other instances, by kind (malformed: dropped messages).',
      labelNames: ['kind'],
      registers,
    }),
    sessionEndToClose: new Histogram({
      name: 'bff_session_end_to_close_seconds',
      help: 'Time from a session ending to the close of a stream it had open on this instance, by stream (websocket, proxied_stream, event_stream).',
      labelNames: ['stream'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
  };
  // Every known label set starts at 0, so that a series exists before its first event: rates
  // and ratios in alerts see 0 rather than nothing (an absent series silences an alert).
  for (const kind of ['connection', 'command']) redisErrors.inc({ kind }, 0);
  for (const outcome of ['success', 'shared', 'invalid_grant', 'failure']) metrics.refreshes.inc({ outcome }, 0);
  for (const outcome of ['success', 'failure']) metrics.clientCredentials.inc({ outcome }, 0);
  for (const outcome of ['success', 'failure', 'dropped']) metrics.tokenRevocations.inc({ outcome }, 0);
  for (const outcome of ['ended', 'replayed', 'refused', 'invalid']) metrics.backchannelLogouts.inc({ outcome }, 0);
  for (const outcome of ['started', 'signed_in', 'invalid_state', 'provider_error', 'failed', 'over_capacity']) metrics.loginTransactions.inc({ outcome }, 0);
  metrics.openEventStreams.set(0);
  metrics.redisMayEvict.set(0);
  for (const kind of SESSION_EVENT_KINDS) {
    metrics.sessionEventsPublished.inc({ kind }, 0);
    metrics.sessionEventsReceived.inc({ kind }, 0);
  }
  metrics.sessionEventsReceived.inc({ kind: 'malformed' }, 0);
  for (const stream of CLOSED_STREAM_KINDS) metrics.sessionEndToClose.zero({ stream });
  return metrics;
}

/**
 * In the cluster primary: the workers' metrics (each a getMetricsAsJSON) summed (gauges marked
 * `max` or `min` use that instead, e.g. bff_login_transactions_active, which every worker reads
 * from Redis), and how many workers are missing from the sum: a scrape answers with the workers
 * that answered in time (one hung worker made every scrape a 500; found by the workers red team).
 */
export async function sumWorkerMetrics(answers: unknown[][], unanswered: number): Promise<{ contentType: string; body: string }> {
  const registry = AggregatorRegistry.aggregate(answers);
  new Gauge({
    name: 'bff_cluster_workers_unanswered',
    help: 'Workers whose metrics are missing from this scrape: they did not answer the primary in time (hung, dying, or failed to collect).',
    registers: [registry],
  }).set(unanswered);
  return { contentType: registry.contentType, body: await registry.metrics() };
}
