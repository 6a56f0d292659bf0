/**
 * createApp(runtime): the one place where the order of request handling is written.
 *
 *   proxied routes (straight from the server: streamed, no Express, the upstream's headers)
 *   → Express: body deadline → request metrics → security headers → health → /metrics
 *     → /auth/* (unknown ones 404) → static SPA → 404 → error handler (also for proxied calls
 *     that failed)
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type Express } from 'express';
import type { UpgradeHandler } from './http/websocket.js';
import type { MetricsSource } from './observability/metrics.js';
import type { Runtime } from './runtime.js';
import { createAuthRouter } from './http/auth-routes.js';
import { createBodyDeadline } from './http/body-deadline.js';
import { createErrorHandler } from './http/error-handler.js';
import { createEventsRoute } from './http/events-route.js';
import { tooManyHeaderFields } from './http/header-fields.js';
import { createHealthRouter } from './http/health-routes.js';
import { createMetricsHandler, createRequestMetrics, markCut } from './http/metrics-route.js';
import { createProxyRoutes } from './http/proxy-routes.js';
import { createRequestTracing } from './http/request-tracing.js';
import { securityHeaders } from './http/security-headers.js';
import { createSessionMiddleware, createSessionReader } from './http/session-cookie.js';
import { asksUpgrade } from './http/server-options.js';
import { createSessionRoutes } from './http/session-routes.js';
import { createStatic } from './http/static.js';
import { GatewayError } from './errors.js';
import { allowedMethods, PROBES } from './http/endpoints.js';
import { canonicalTarget, refusedPath } from './proxy/canonical-path.js';
import { announcesBody } from './proxy/headers.js';

/**
 * The HTTP server's `request` listener, plus the handler it must call for `upgrade` events and
 * the Express app behind both.
 */
export type GatewayApp = ((req: IncomingMessage, res: ServerResponse) => void) & {
  handleUpgrade: UpgradeHandler;
  express: Express;
  /** At the start of a drain: ends the gateway's own endless answers (GET /auth/events), which reconnect elsewhere. */
  drain(): void;
};

const FAILED = Symbol('failed');
type Failed = IncomingMessage & { [FAILED]?: { error: unknown; route?: string } };

export interface AppOptions {
  /** Where GET /metrics on the main port reads from (a cluster worker asks its primary). */
  metricsSource?: MetricsSource;
  /** GET /auth/events timing and bounds (http/events-route.ts defaults: heartbeat 15 s, notice 300 s, retry 3 s, 8 per session, 10,000 open). */
  eventStream?: { heartbeatMs?: number; endingNoticeSeconds?: number; retryMs?: number; maxPerSession?: number; maxPerUser?: number; maxOpen?: number };
}

export function createApp(runtime: Runtime, options: AppOptions = {}): GatewayApp {
  const { config } = runtime;
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  // Express's own reading of X-Forwarded-* stays off: the client address is decided in one place,
  // proxy/trust.ts, for the forwarding headers and the login rate limit alike.
  app.set('trust proxy', false);
  // Queries are read by http/query.ts alone, as openid-client reads them.
  app.set('query parser', false);

  const sessionMiddleware = createSessionMiddleware(config, runtime.store);

  const ownHeaders = securityHeaders({ providerOrigin: new URL(config.oidc.issuer).origin });

  const requestMetrics = createRequestMetrics(runtime.metrics, config);
  // One reader (one cookie memo) for proxied calls, WebSocket upgrades and GET /auth/events.
  const readSession = createSessionReader(config, runtime.records);
  const requestTracing = runtime.tracing.enabled ? createRequestTracing(runtime.tracing, config.server.authPath) : undefined;
  // A proxied call that failed comes through Express only to be answered by the error handler.
  // If its body has not all arrived, the connection closes after the answer: Node would otherwise
  // read and discard the rest for as long as the client trickles it, and the body deadline below
  // is skipped on this path (so that proxied uploads are never cut).
  // (A refusal made inside the request event, a refused path, sees `complete` false even for a
  // request with no body: only one that announces a body closes its connection.)
  app.use((req: Failed, res, next) => {
    const failed = req[FAILED];
    if (failed !== undefined && !req.complete && announcesBody(req.headers)) res.shouldKeepAlive = false;
    // The error handler's log line names the route (Express matched none for a proxied call).
    if (failed?.route !== undefined) res.locals.route = failed.route;
    next(failed?.error);
  });
  // A span per gateway endpoint, around everything below (only when tracing is on).
  if (requestTracing) app.use(requestTracing.endpoints);
  // The first middleware of the gateway's own endpoints (a failed proxied call skips it: the
  // line above hands it straight to the error handler, and proxied uploads are never cut).
  app.use(createBodyDeadline({ seconds: config.server.requestBodyTimeoutSeconds, headers: ownHeaders }));
  app.use(requestMetrics.middleware);
  // Proxied answers are the upstream's own: they pass through without the gateway's headers.
  const proxy = createProxyRoutes(runtime, {
    readSession,
    meter: requestMetrics.meter,
    record: requestMetrics.record,
    ...(requestTracing ? { tracing: requestTracing } : {}),
    // An upstream's step-up challenge also goes to the session's GET /auth/events (every tab).
    stepUpRequired: ({ sessionDigest, challenge }) => {
      if (sessionDigest === undefined) return;
      runtime.events.publish(sessionDigest, {
        type: 'step-up-required',
        loginUrl: challenge.loginUrl,
        ...(challenge.acr_values !== null ? { acr_values: challenge.acr_values } : {}),
        ...(challenge.max_age !== null ? { max_age: challenge.max_age } : {}),
      });
    },
    fail(req: Failed, res, error, route) {
      if (res.headersSent || req[FAILED]) {
        // Mid-stream failure: the only honest signal left is to cut the connection.
        markCut(res);
        res.destroy();
        return;
      }
      req[FAILED] = { error: error ?? new Error('proxied call failed'), ...(route !== undefined ? { route } : {}) };
      app(req, res);
    },
  });

  app.use(ownHeaders);
  app.use(
    createHealthRouter({
      checks: { redis: () => runtime.redisReady(), provider: () => runtime.provider.isReady() },
    }),
  );
  if (config.server.metricsPort === undefined) app.get('/metrics', createMetricsHandler(options.metricsSource ?? runtime.metrics.source));

  app.use(
    config.server.authPath,
    createAuthRouter({
      config,
      provider: runtime.provider,
      transactions: runtime.transactions,
      vault: runtime.vault,
      registry: runtime.registry,
      loginLimiter: runtime.loginLimiter,
      sessionMiddleware,
      logger: runtime.logger,
      metrics: runtime.metrics,
      clock: runtime.clock,
      dpopNonces: runtime.dpopNonces,
      revocations: runtime.revocations,
    }),
  );

  app.use(
    config.server.authPath,
    createSessionRoutes({
      config,
      provider: runtime.provider,
      registry: runtime.registry,
      redis: runtime.redis,
      keys: runtime.keys,
      sessionMiddleware,
      logger: runtime.logger,
      metrics: runtime.metrics,
      clock: runtime.clock,
      revocations: runtime.revocations,
    }),
  );

  // GET /auth/events: the session's events as server-sent events (issue 16).
  const events = createEventsRoute({ ...runtime, ...options.eventStream, readSession });
  runtime.onClose(() => events.close());
  app.use(config.server.authPath, events);

  // A gateway endpoint asked with a method it does not answer: 405 with the ones it does (RFC 9110 §15.5.6).
  const servedProbes = new Set([...PROBES].filter((probe) => probe !== '/metrics' || config.server.metricsPort === undefined));
  app.use((req, _res, next) => {
    const allow = allowedMethods(req.path, config.server.authPath, servedProbes);
    next(allow === undefined ? undefined : new GatewayError('method_not_allowed', { headers: { allow } }));
  });
  // Nothing else lives under authPath: an unknown /auth path is a JSON 404, never the SPA's page.
  app.use(config.server.authPath, (_req, _res, next) => next(new GatewayError('not_found')));

  if (config.static) app.use(createStatic(config.static.root, config.static.spaFallback));

  app.use((_req, _res, next) => next(new GatewayError('not_found')));
  app.use(
    createErrorHandler(runtime.logger, {
      htmlPaths: [`${config.server.authPath}/login`, `${config.server.authPath}/callback`],
      // The proxy's own refusals (403 csrf, 401, 502...) are gateway answers: helmet applies.
      headers: ownHeaders,
      ...(requestTracing ? { onError: requestTracing.answeredWith } : {}),
      clock: runtime.clock,
    }),
  );
  // One canonical request target for everything behind this point, proxy and Express alike
  // (SPEC §4): routes are matched, and upstreams called, on the very path that was checked.
  // A refused request (its target, or its header fields) goes the way of a failed proxied call,
  // to the one error renderer.
  const handleRequest = (req: Failed, res: ServerResponse) => {
    const target = canonicalTarget(req.url);
    if (typeof target === 'string') req.url = target;
    // Express routes only origin-form targets: give it one to reach the error handler with.
    else if (target.refused === 'not_origin_form') req.url = '/';
    const refused = typeof target === 'string' ? tooManyHeaderFields(req) : refusedPath(target);
    if (refused) {
      req[FAILED] = { error: refused };
      app(req, res);
      return;
    }
    // A request that asked to upgrade to something else (h2c) is served as HTTP/1.1
    // (http/server-options.ts), but Node's parser stops at its end: a request pipelined behind
    // it would never be read nor answered. Its connection closes instead. Only then: with
    // Upgrade alone the parser reads on, and a request pipelined behind was forwarded with the
    // session's token, its answer dropped with the connection.
    if (asksUpgrade(req)) res.shouldKeepAlive = false;
    if (!proxy.handle(req, res)) app(req, res);
  };
  return Object.assign(handleRequest, { handleUpgrade: proxy.upgrade, express: app, drain: () => events.close() });
}
