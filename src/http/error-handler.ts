/**
 * The one place where errors become responses (SPEC §6). GatewayError → its status and body;
 * client errors raised by Express or body parsers → 400/404/413 in the same shape; anything else
 * is a bug → 500 server_error, logged with its stack, never sent.
 */
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { GatewayError, type ErrorCode } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import { failureLogGate } from '../clock.js';

function classify(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const status = (err as { status?: unknown; statusCode?: unknown }).status ?? (err as { statusCode?: unknown }).statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code: ErrorCode = status === 404 ? 'not_found' : status === 405 ? 'method_not_allowed' : 'invalid_request';
    return new GatewayError(code, { cause: err });
  }
  if (err instanceof URIError) return new GatewayError('invalid_request', { cause: err });
  return new GatewayError('server_error', { cause: err });
}

export function sendError(res: Response, error: GatewayError): void {
  res.status(error.status);
  res.set('Cache-Control', 'no-store');
  for (const [name, value] of Object.entries(error.headers)) res.set(name, value);
  res.json(error.toBody());
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);

/** For browser navigations (login, callback): the same status, as a small page. */
export function sendErrorPage(res: Response, error: GatewayError): void {
  res.status(error.status);
  res.set('Cache-Control', 'no-store');
  for (const [name, value] of Object.entries(error.headers)) res.set(name, value);
  res.type('html').send(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign-in problem</title></head>` +
      `<body><h1>Sign-in problem</h1><p>${escapeHtml(error.description)}</p>` +
      `<p><code>${escapeHtml(error.code)}</code></p><p><a href="/">Back to the application</a></p></body></html>`,
  );
}

export function wantsHtml(req: Request): boolean {
  return req.method === 'GET' && req.accepts(['json', 'html']) === 'html';
}

export function createErrorHandler(
  logger: Logger,
  options: { htmlPaths?: readonly string[]; headers?: RequestHandler; onError?: (code: ErrorCode) => void; clock?: () => number } = {},
): ErrorRequestHandler {
  const htmlPaths = new Set(options.htmlPaths ?? []);
  // Redis, the provider or an upstream down fails every call alike: a line each flooded the
  // logs (found by the hygiene red team); their count is in the metrics. A bug is always said.
  const mayLog = failureLogGate(options.clock ?? (() => performance.now()));
  return function errorHandler(err, req, res, _next) {
    const error = classify(err);
    options.onError?.(error.code);
    // Express's route, or the proxied route a failed call was for (app.ts).
    const route: string | undefined = req.route?.path ?? (typeof res.locals.route === 'string' ? res.locals.route : undefined);
    if (error.code === 'server_error') {
      logger.error({ err, code: error.code, method: req.method, route }, 'request failed');
    } else if (error.status >= 500) {
      const suppressed = mayLog(`${error.code} ${route ?? ''}`);
      if (suppressed !== undefined) logger.warn({ err: error, code: error.code, method: req.method, route, suppressed }, 'request failed (said once per 10 s per code and route; suppressed: lines not written since)');
    } else {
      logger.debug({ code: error.code, method: req.method }, 'request refused');
    }
    if (res.headersSent) {
      // Mid-stream failure: the only honest signal left is to cut the connection.
      res.destroy();
      return;
    }
    const send = () => {
      if (htmlPaths.has(req.path) && wantsHtml(req)) sendErrorPage(res, error);
      else sendError(res, error);
    };
    if (options.headers) options.headers(req, res, send);
    else send();
  };
}
