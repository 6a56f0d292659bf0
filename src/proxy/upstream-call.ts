/**
 * One proxied call's state and the rules its upstream answer is judged by: whether a request
 * may be sent twice, whether a failure was a stale pooled connection, whether a 401 refused the
 * token, and how an answer is passed on. The state rides on the request itself (symbols), not in
 * a WeakMap keyed by request: a collection keyed per request gets its tables rehashed into the
 * old generation (see deadlines.ts).
 */
import type http from 'node:http';
import type { Socket } from 'node:net';
import type { DpopAttachment } from './dpop-proofs.js';
import { announcesBody, responseHeaders } from './headers.js';
import { asCookieAnswer } from './cache-headers.js';
import type { Relocate } from './location.js';
import type { Credential } from './upstream.js';
import { parseWwwAuthenticate } from './www-authenticate.js';

/**
 * GET, HEAD, OPTIONS or DELETE without a body: safe to send twice. The body is judged by the
 * framing headers, whatever the method: a GET may carry one too, and a resend (empty stand-in
 * body) of a request that announced N bytes would let the upstream read the next N bytes on
 * that pooled connection, the gateway's next request, as its body: request smuggling.
 */
export function isBodyless(req: http.IncomingMessage): boolean {
  const method = req.method ?? 'GET';
  if (method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS' && method !== 'DELETE') return false;
  return !announcesBody(req.headers);
}

export const RETRY = Symbol('retry');
/** Whether the current upstream attempt went out on a pooled (reused) connection; then whether it was resent. */
export const POOLED = Symbol('pooled');
export const RESENT = Symbol('resent');
/** The DPoP attachment of the current attempt (DPoP routes only), and whether its nonce retry was spent. */
export const DPOP = Symbol('dpop');
export const NONCE_RETRIED = Symbol('nonce-retried');
/** The canonical gateway request target, kept when req.url becomes the upstream's (location.ts resolves against it). */
export const TARGET = Symbol('target');
export type Retriable = http.IncomingMessage & {
  /** The credential a retriable attempt carries, until a 401 refuses it or the answer passes. */
  [RETRY]?: Credential | undefined;
  [POOLED]?: boolean;
  [RESENT]?: true;
  [DPOP]?: { attachment: DpopAttachment; bodyless: boolean; htu: string };
  [NONCE_RETRIED]?: true;
  [TARGET]?: string;
};

/** A connection taken from the pool that the upstream reset: whatever the method. */
export function resetOnReuse(err: Error, req: Retriable): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return (code === 'ECONNRESET' || code === 'EPIPE') && req[POOLED] === true;
}

/**
 * A pooled keep-alive connection the upstream closed just as the gateway sent on it (its idle
 * timeout raced the request): the request failed before any answer and never reached the
 * upstream's application. Safe to send again, once, on a fresh connection, when it has no body
 * (RFC 9112 §9.3.1 lets a client retry an idempotent request after such a close).
 */
export function staleConnection(err: Error, req: Retriable, res: http.ServerResponse | Socket): boolean {
  return (
    resetOnReuse(err, req) &&
    req[RESENT] !== true &&
    'headersSent' in res &&
    !res.headersSent &&
    isBodyless(req)
  );
}

/**
 * Every upstream answer is written by the gateway itself rather than by httpxy (whose writer
 * copies the upstream's Connection, or the browser's, into the answer): status (Node's own reason
 * phrase), headers, streamed body. One writeHead with the raw header list (order and case kept) instead of a setHeader per
 * header; hop-by-hop headers and Set-Cookie values that would overwrite the gateway's cookies
 * are left out and a Location naming an upstream is made the gateway's (headers.ts), so the
 * gateway's server frames and keeps alive its own connection.
 * A session-gated route's answer has its caching headers read for the cookie (`forCookie`, cache-headers.ts).
 */
export function passThrough(
  proxyRes: http.IncomingMessage,
  res: http.ServerResponse,
  isGatewayCookie: (name: string) => boolean,
  forCookie: boolean,
  relocate: Relocate | undefined,
  csrfHeader: string,
): void {
  const status = proxyRes.statusCode ?? 502;
  const req: Retriable = res.req;
  const headers = responseHeaders(proxyRes.rawHeaders, isGatewayCookie, relocate, status, req.method, req[TARGET]);
  const answer = forCookie ? asCookieAnswer(headers, status) : headers;
  // Every proxied call carried the CSRF header; a navigation never does. Chromium handed an
  // answer the SPA's fetch had cached to a later navigation to its URL (a link on a page of the
  // same site), which rendered it as a document of the gateway's origin with none of its
  // headers, past the CSRF check: an upstream's HTML ran as the app.
  answer.push('Vary', csrfHeader);
  // RFC 9110 §8.6: never a Content-Length on a 204 (Node writes what it is given). A front proxy
  // that framed the answer by it read the next answer's bytes as this one's body.
  if (status === 204) dropContentLength(answer);
  // The status without the upstream's reason phrase: Node's client parser takes any byte but CR
  // and LF in it, writeHead refuses control characters (an uncaught throw: the process went).
  res.writeHead(status, answer);
  proxyRes.pipe(res);
}

function dropContentLength(raw: string[]): void {
  for (let i = raw.length - 2; i >= 0; i -= 2) if ((raw[i] as string).toLowerCase() === 'content-length') raw.splice(i, 2);
}

/**
 * The WWW-Authenticate of a 401 says the token itself was refused (RFC 6750 §3.1, RFC 9449
 * §7.1): a Bearer or DPoP challenge whose error is exactly invalid_token, read by the one
 * WWW-Authenticate reader (not `error=invalid_token` inside some quoted realm).
 */
export function rejectsToken(proxyRes: http.IncomingMessage): boolean {
  if (proxyRes.statusCode !== 401) return false;
  return parseWwwAuthenticate(proxyRes.headers['www-authenticate']).some(
    (c) => (c.scheme === 'bearer' || c.scheme === 'dpop') && c.params.error === 'invalid_token',
  );
}
