import type { RequestHandler } from 'express';
import type { Config } from '../config/load.js';
import type { Metrics } from '../observability/metrics.js';

/** Counts and times every request under a bounded label: a configured route, an endpoint, or "other". */
export function createRequestMetrics(metrics: Metrics, config: Config): RequestHandler {
  const auth = config.server.authPath;
  const endpoints = new Set(['/healthz', '/readyz', '/metrics', ...['login', 'callback', 'user', 'logout', 'backchannel-logout', 'sessions'].map((e) => `${auth}/${e}`)]);
  const labelFor = (path: string) => {
    if (endpoints.has(path)) return path;
    if (path.startsWith(`${auth}/sessions/`)) return `${auth}/sessions/:id`;
    return 'other';
  };
  // Label children bound once (prom-client hashes label sets on every call otherwise).
  const counters = new Map<string, ReturnType<Metrics['requests']['labels']>>();
  const histograms = new Map<string, ReturnType<Metrics['latency']['labels']>>();
  const counter = (route: string, method: string, status: number) => {
    const key = `${route} ${method} ${status}`;
    let child = counters.get(key);
    if (!child) counters.set(key, (child = metrics.requests.labels(route, method, String(status))));
    return child;
  };
  const histogram = (route: string) => {
    let child = histograms.get(route);
    if (!child) histograms.set(route, (child = metrics.latency.labels(route)));
    return child;
  };
  return function requestMetrics(req, res, next) {
    const start = process.hrtime.bigint();
    res.once('finish', () => {
      // originalUrl: inside a mounted router req.path is relative to the mount point.
      const route = (res.locals.metricsRoute as string | undefined) ?? labelFor(req.originalUrl.split('?')[0] as string);
      counter(route, req.method, res.statusCode).inc();
      histogram(route).observe(Number(process.hrtime.bigint() - start) / 1e9);
    });
    next();
  };
}

export function createMetricsHandler(metrics: Metrics): RequestHandler {
  return async function serveMetrics(_req, res) {
    res.set('Content-Type', metrics.registry.contentType);
    res.set('Cache-Control', 'no-store');
    res.send(await metrics.registry.metrics());
  };
}
