import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Config } from '../config/load.js';
import type { Metrics, MetricsSource } from '../observability/metrics.js';

export interface RequestMetrics {
  /** Express middleware: meters every request that reached Express and was not metered yet. */
  middleware: RequestHandler;
  /** Meters one request under `label` (proxied calls, served before Express). Idempotent. */
  meter(req: IncomingMessage, res: ServerResponse, label?: string): void;
}

const METERED = Symbol('metered');
type Metered = ServerResponse & { [METERED]?: true };

/** Counts and times every request under a bounded label: a configured route, an endpoint, or "other". */
export function createRequestMetrics(metrics: Metrics, config: Config): RequestMetrics {
  const auth = config.server.authPath;
  const endpoints = new Set(['/healthz', '/readyz', '/metrics', ...['login', 'callback', 'user', 'logout', 'backchannel-logout', 'sessions'].map((e) => `${auth}/${e}`)]);
  const labelFor = (url: string) => {
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
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
  function meter(req: IncomingMessage, res: Metered, label?: string) {
    if (res[METERED]) return;
    res[METERED] = true;
    // The URL as received: inside a mounted Express router req.url is relative to the mount point.
    const url = req.url ?? '/';
    const start = process.hrtime.bigint();
    res.once('finish', () => {
      const route = label ?? labelFor(url);
      counter(route, req.method ?? 'GET', res.statusCode).inc();
      histogram(route).observe(Number(process.hrtime.bigint() - start) / 1e9);
    });
  }
  return {
    meter,
    middleware(req, res, next) {
      meter(req, res);
      next();
    },
  };
}

/** GET /metrics from `source`: this process's registry, or the sum over cluster workers. */
export function createMetricsHandler(source: MetricsSource): RequestHandler {
  return async function serveMetrics(_req, res) {
    const { contentType, body } = await source();
    res.set('Content-Type', contentType);
    res.set('Cache-Control', 'no-store');
    res.send(body);
  };
}
