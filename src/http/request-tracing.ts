/**
 * The request-level spans (tracing on only; with tracing off none of this is built):
 *
 *   proxy <route path>   SERVER, one per proxied call or WebSocket upgrade
 *   <METHOD> <endpoint>  SERVER, one per gateway endpoint (/auth/login, /auth/callback...)
 *   upstream             CLIENT, the call to the route's upstream, whose traceparent it carries
 *
 * Names and attributes come from fixed vocabularies only: the route path as configured, the
 * endpoint's template (never the request's own path: `/auth/sessions/:id`), the method (or
 * `_OTHER`), the status, and `bff.outcome` (`ok`, or the error code the gateway answered). The
 * URL's query, headers and cookies are never read into a span.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { RequestHandler } from 'express';
import { errorCodeOf, type SpanHandle, type Tracing } from '../observability/tracing.js';
import type { UpstreamTrace } from '../proxy/upstream.js';
import { endpointOf, PROBES } from './endpoints.js';

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE']);

/** The request's method for a span: a standard one, or `_OTHER` (OpenTelemetry's convention). */
export function methodOf(req: IncomingMessage): string {
  const method = req.method ?? '';
  return METHODS.has(method) ? method : '_OTHER';
}

/**
 * The span name of a gateway endpoint for a (canonical) request path (endpoints.ts), or
 * undefined for the probes: a span every few seconds per instance would say nothing.
 */
export function endpointTemplate(path: string, authPath: string): string | undefined {
  const endpoint = endpointOf(path, authPath);
  return PROBES.has(endpoint) ? undefined : endpoint;
}

/** Ends a request's SERVER span with the status the browser got. */
function endServerSpan(span: SpanHandle, res: ServerResponse): void {
  const status = res.statusCode;
  if (res.headersSent) span.setAttributes({ 'http.response.status_code': status });
  if (!res.writableFinished) span.setAttributes({ 'bff.outcome': 'aborted' });
  // A 4xx is the caller's problem, not the gateway's (OpenTelemetry's rule for SERVER spans).
  if (status >= 500) span.fail(String(status));
  span.end();
}

const UPSTREAM_SPAN = Symbol('upstreamSpan');
const SERVER_SPAN = Symbol('serverSpan');
type Traced = IncomingMessage & { [UPSTREAM_SPAN]?: SpanHandle; [SERVER_SPAN]?: SpanHandle };

export interface RequestTracing {
  /** Runs a proxied call in its `proxy <route>` span. */
  proxyCall(req: IncomingMessage, res: ServerResponse, route: string, serve: () => Promise<void>): void;
  /** The same for a WebSocket upgrade; the span ends when the handshake is settled. */
  upgrade(req: IncomingMessage, socket: Socket, route: string | undefined, handle: () => void): void;
  /** Express middleware: the span of a gateway endpoint. */
  endpoints: RequestHandler;
  /** The hooks proxy/upstream.ts calls for its CLIENT span. */
  upstream(route: string): UpstreamTrace;
  /** Marks the active span with the error code the gateway answers (error-handler.ts). */
  answeredWith(code: string): void;
}

export function createRequestTracing(tracing: Tracing, authPath: string): RequestTracing {
  const ok = { 'bff.outcome': 'ok' };
  return {
    proxyCall(req, res, route, serve) {
      const span = tracing.startServerSpan(`proxy ${route}`, req.headers, { 'http.request.method': methodOf(req), 'http.route': route, ...ok });
      res.once('close', () => endServerSpan(span, res));
      void tracing.withSpan(span, serve);
    },
    upgrade(req, socket, route, handle) {
      const name = route === undefined ? 'proxy' : `proxy ${route}`;
      const span = tracing.startServerSpan(name, req.headers, {
        'http.request.method': methodOf(req),
        ...(route === undefined ? {} : { 'http.route': route }),
        'bff.outcome': 'refused',
      });
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        span.end();
      };
      (req as Traced)[SERVER_SPAN] = { setAttributes: (a) => span.setAttributes(a), fail: (c) => span.fail(c), end };
      socket.once('close', end);
      tracing.withSpan(span, handle);
    },
    endpoints(req, res, next) {
      const template = endpointTemplate(req.path, authPath);
      if (template === undefined) return next();
      const method = methodOf(req);
      const span = tracing.startServerSpan(`${method} ${template}`, req.headers, { 'http.request.method': method, 'http.route': template, ...ok });
      res.once('close', () => endServerSpan(span, res));
      tracing.withSpan(span, next);
    },
    upstream(route) {
      const attributes = { 'bff.route': route };
      return {
        start(req) {
          const span = tracing.startSpan('upstream', { kind: 'client', attributes: { ...attributes, 'http.request.method': methodOf(req) } });
          (req as Traced)[UPSTREAM_SPAN] = span;
          // The upstream sees the gateway's span as its parent; the browser's own traceparent
          // (and tracestate) never goes on: trusted, it is already this trace's ancestor.
          tracing.inject(span, req.headers);
        },
        answered(req, status) {
          const span = (req as Traced)[UPSTREAM_SPAN];
          if (span === undefined) return;
          (req as Traced)[UPSTREAM_SPAN] = undefined;
          span.setAttributes({ 'http.response.status_code': status });
          if (status >= 500) span.fail(String(status));
          span.end();
          if (status === 101) {
            (req as Traced)[SERVER_SPAN]?.setAttributes({ 'http.response.status_code': 101, 'bff.outcome': 'ok' });
            (req as Traced)[SERVER_SPAN]?.end();
          }
        },
        failed(req, code) {
          const span = (req as Traced)[UPSTREAM_SPAN];
          if (span === undefined) return;
          (req as Traced)[UPSTREAM_SPAN] = undefined;
          span.fail(code);
          span.end();
        },
        settled(req, opened) {
          return opened.then(
            () => this.answered(req, 101),
            (err: unknown) => {
              this.failed(req, errorCodeOf(err));
              throw err;
            },
          );
        },
      };
    },
    answeredWith(code) {
      tracing.annotate({ 'bff.outcome': code });
    },
  };
}
