/**
 * The app behind `server.metricsPort`: `/metrics` and nothing else. An Express app of its own
 * (rather than a bare request listener) so that a failing scrape goes through the one error
 * renderer, answering 500 `server_error` like any other bug, instead of escaping as an
 * unhandled rejection that would end the process (0.3.0 died on its first scrape there).
 */
import express, { type Express } from 'express';
import { GatewayError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { MetricsSource } from '../observability/metrics.js';
import { createErrorHandler } from './error-handler.js';
import { createMetricsHandler } from './metrics-route.js';

export function createMetricsApp(source: MetricsSource, logger: Logger): Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.get('/metrics', createMetricsHandler(source));
  app.use((_req, _res, next) => next(new GatewayError('not_found')));
  app.use(createErrorHandler(logger));
  return app;
}
