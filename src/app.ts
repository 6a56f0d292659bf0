/**
 * createApp(runtime): the one place where the order of middleware is written.
 *
 *   request metrics → proxied routes (streamed, no body parsing, the upstream's headers)
 *   → security headers → health → /metrics → /auth/* → static SPA → 404 → error handler
 */
import express, { type Express } from 'express';
import type { UpgradeHandler } from './http/websocket.js';
import type { Runtime } from './runtime.js';
import { createAuthRouter } from './http/auth-routes.js';
import { createErrorHandler } from './http/error-handler.js';
import { createHealthRouter } from './http/health-routes.js';
import { createMetricsHandler, createRequestMetrics } from './http/metrics-route.js';
import { createProxyRoutes } from './http/proxy-routes.js';
import { securityHeaders } from './http/security-headers.js';
import { createSessionMiddleware } from './http/session-cookie.js';
import { createSessionRoutes } from './http/session-routes.js';
import { createStatic } from './http/static.js';
import { GatewayError } from './errors.js';

/** The Express app plus the handler the HTTP server must call for `upgrade` events. */
export type GatewayApp = Express & { handleUpgrade: UpgradeHandler };

export function createApp(runtime: Runtime): GatewayApp {
  const { config } = runtime;
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('trust proxy', config.server.trustProxy);
  app.set('query parser', 'simple');

  const sessionMiddleware = createSessionMiddleware(config, runtime.store);

  const ownHeaders = securityHeaders({ providerOrigin: new URL(config.oidc.issuer).origin });

  app.use(createRequestMetrics(runtime.metrics, config));
  // Proxied answers are the upstream's own: they pass through without the gateway's headers.
  const proxy = createProxyRoutes(runtime);
  app.use(proxy.middleware);

  app.use(ownHeaders);
  app.use(
    createHealthRouter({
      checks: { redis: () => runtime.redisReady(), provider: () => runtime.provider.isReady() },
    }),
  );
  if (config.server.metricsPort === undefined) app.get('/metrics', createMetricsHandler(runtime.metrics));

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
    }),
  );

  app.use(
    config.server.authPath,
    createSessionRoutes({
      config,
      provider: runtime.provider,
      registry: runtime.registry,
      vault: runtime.vault,
      redis: runtime.redis,
      keys: runtime.keys,
      sessionMiddleware,
      logger: runtime.logger,
      clock: runtime.clock,
    }),
  );

  if (config.static) app.use(createStatic(config.static.root, config.static.spaFallback));

  app.use((_req, _res, next) => next(new GatewayError('not_found')));
  app.use(
    createErrorHandler(runtime.logger, {
      htmlPaths: [`${config.server.authPath}/login`, `${config.server.authPath}/callback`],
      // The proxy's own refusals (403 csrf, 401, 502...) are gateway answers: helmet applies.
      headers: ownHeaders,
    }),
  );
  return Object.assign(app, { handleUpgrade: proxy.upgrade });
}
