import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Config } from '../config/load.js';
import type { Metrics, MetricsSource } from '../observability/metrics.js';
import type { CounterSeries, HistogramSeries } from '../observability/lean-series.js';
import { endpointOf } from './endpoints.js';

export interface RequestMetrics {
  /** Express middleware: meters every request that reached Express and was not metered yet. */
  middleware: RequestHandler;
  /** Meters one request under `label` (proxied calls, served before Express). Idempotent. */
  meter(req: IncomingMessage, res: ServerResponse, label?: string): void;
  /** Counts one answer without a response object (a WebSocket upgrade: its 101 or refusal). */
  record(label: string, method: string, status: number, startedAt: number): void;
}

/** Set on a metered response: its label and when it started (plain fields: no object per call). */
const LABEL = Symbol('label');
const START = Symbol('start');
/** Set on a response the gateway cut itself after its head (an upstream that died mid-answer). */
const CUT = Symbol('cut');
type Metered = ServerResponse & { [LABEL]?: string; [START]?: number; [CUT]?: true };

/**
 * The status counted for an answer that never finished: `502` for one the gateway cut after its
 * head (the upstream died mid-answer), `499` (nginx's) for one the client abandoned, mostly on a
 * slow upstream. Both were counted nowhere: an upstream slower than its clients wait paged no
 * one, and the latency histogram never saw them (found by the observability red team).
 */
const CLIENT_CLOSED = 499;

/** Marks `res` as cut by the gateway (app.ts: a proxied call failed mid-answer), before it is destroyed. */
export function markCut(res: ServerResponse): void {
  (res as Metered)[CUT] = true;
}

/** Counts and times every request under a bounded label: a configured route, an endpoint, or "other". */
export function createRequestMetrics(metrics: Metrics, config: Config): RequestMetrics {
  const auth = config.server.authPath;
  // The endpoint names traces use (endpoints.ts); everything else (the SPA, 404s) is "other".
  const labelFor = (url: string) => {
    const q = url.indexOf('?');
    const endpoint = endpointOf(q === -1 ? url : url.slice(0, q), auth);
    return endpoint === '/*' || endpoint === `${auth}/*` ? 'other' : endpoint;
  };
  // Series bound once per label set, looked up without building a key string per call.
  const counters = new Map<string, Map<string, Map<number, CounterSeries>>>();
  const histograms = new Map<string, HistogramSeries>();
  const counter = (route: string, method: string, status: number) => {
    let byMethod = counters.get(route);
    if (!byMethod) counters.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map()));
    let series = byStatus.get(status);
    if (!series) byStatus.set(status, (series = metrics.requests.labels(route, method, String(status))));
    return series;
  };
  const histogram = (route: string) => {
    let series = histograms.get(route);
    if (!series) histograms.set(route, (series = metrics.latency.labels(route)));
    return series;
  };
  function record(label: string, method: string, status: number, startedAt: number) {
    counter(label, method, status).inc();
    histogram(label).observe((performance.now() - startedAt) / 1000);
  }
  // One listener function for every response (no closure per call): `this` is the response.
  // On 'close', which comes for every response, finished or not ('finish' only for the first).
  function closed(this: Metered) {
    const status = this.writableFinished ? this.statusCode : this[CUT] ? 502 : CLIENT_CLOSED;
    record(this[LABEL] as string, this.req.method ?? 'GET', status, this[START] as number);
  }
  function meter(req: IncomingMessage, res: Metered, label?: string) {
    if (res[LABEL] !== undefined) return;
    // The URL as received: inside a mounted Express router req.url is relative to the mount point.
    res[LABEL] = label ?? labelFor(req.url ?? '/');
    res[START] = performance.now();
    // 'close' comes once: a plain listener, without once()'s wrapper.
    res.on('close', closed);
  }
  return {
    meter,
    record,
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
