/**
 * The upstream half of a WebSocket upgrade (RFC 6455 §4), done by the gateway itself rather
 * than by httpxy: httpxy relays an upstream's non-101 answer (status, headers, body) straight
 * onto the browser's socket, with no hook to stop it. Here only a 101 with `Upgrade: websocket`
 * reaches the browser; anything else becomes a gateway error (SPEC §4, §6), so an upstream's
 * error page, cookies or headers never leak through an upgrade.
 *
 * The handshake goes on its own connection (no pooling: the socket becomes the tunnel) with the
 * request headers the gateway prepared, plus the two it alone sets: Connection: Upgrade and
 * Upgrade: websocket. The browser's Sec-WebSocket-Key/Version/Protocol/Extensions pass as sent,
 * so the upstream's Sec-WebSocket-Accept answers the browser's key.
 */
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { GatewayError } from '../errors.js';
import { keepNonce, type DpopAttachment } from './dpop-proofs.js';
import { responseHeaders } from './headers.js';
import { fromUpstreamError, UpstreamTimeout } from './errors.js';
import { joinTargetPath } from './target-path.js';

export interface TunnelOptions {
  /** The route's target. */
  target: URL;
  /** The upstream request target: path (the route's rule applied) and query. */
  path: string;
  /** How long the upstream may take to answer the handshake. */
  timeoutMs: number;
  isGatewayCookie: (name: string) => boolean;
  /**
   * A DPoP route's proofs: a DPoP-Nonce on the handshake's answer, 101 or refusal, is kept, so
   * that the SPA's reconnect carries it (there is no nonce retry within a handshake).
   */
  dpop?: DpopAttachment | undefined;
  /** RFC 9470: the error for a 401 step-up challenge on the handshake, else undefined. */
  stepUp?: ((req: http.IncomingMessage, wwwAuthenticate: string | undefined) => Error | undefined) | undefined;
}

/** Joins the target's own path prefix and the request path, as httpxy does for HTTP calls. */
function upstreamPath(target: URL, path: string): string {
  const joined = joinTargetPath(target.pathname, path);
  if (!target.search) return joined;
  return joined.includes('?') ? joined.replace('?', `${target.search}&`) : joined + target.search;
}

function keepOpen(socket: Socket): void {
  socket.setTimeout(0);
  socket.setNoDelay(true);
  socket.setKeepAlive(true, 0);
}

/** The 101 head for the browser: the upstream's headers minus hop-by-hop ones, plus ours. */
function switchingProtocols(upstream: http.IncomingMessage, isGatewayCookie: (name: string) => boolean): string {
  const headers = responseHeaders(upstream.rawHeaders, isGatewayCookie);
  let head = 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n';
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i] as string}: ${headers[i + 1] as string}\r\n`;
  return `${head}\r\n`;
}

const browserLeft = () => new GatewayError('bad_gateway', { cause: new Error('the browser left during the WebSocket handshake') });

/**
 * Opens the upstream WebSocket for `req` and joins it to the browser's `socket`. Resolves once
 * the 101 is written to the browser; rejects (having written nothing) with 502 bad_gateway when
 * the upstream cannot be reached or answers anything but a WebSocket 101, 504 gateway_timeout
 * when it does not answer in time.
 */
export function openTunnel(req: http.IncomingMessage, socket: Socket, head: Buffer, options: TunnelOptions): Promise<void> {
  const { target } = options;
  // A browser already gone has had its 'close': the listener below would never hear it, and the
  // upstream WebSocket would be opened and never closed.
  if (socket.destroyed) return Promise.reject(browserLeft());
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const settle = (err?: GatewayError): boolean => {
      if (settled) return false;
      settled = true;
      clearTimeout(timer);
      socket.off('close', onBrowserGone);
      if (err) reject(err);
      else resolve();
      return true;
    };
    const upstreamReq = (target.protocol === 'https:' ? https : http).request({
      protocol: target.protocol,
      hostname: target.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: target.port || (target.protocol === 'https:' ? 443 : 80),
      method: 'GET',
      path: upstreamPath(target, options.path),
      headers: { ...req.headers, host: target.host, connection: 'Upgrade', upgrade: 'websocket' },
      agent: false,
      // Whatever the environment says, as httpxy does for every other call: under
      // NODE_TLS_REJECT_UNAUTHORIZED=0 the handshake, Bearer included, went to an impostor while
      // plain calls were refused (found by the TLS red team).
      rejectUnauthorized: true,
    });
    const timer = setTimeout(() => upstreamReq.destroy(new UpstreamTimeout('no WebSocket handshake answer in time')), options.timeoutMs);
    timer.unref();
    const onBrowserGone = () => {
      if (settle(browserLeft())) upstreamReq.destroy();
    };
    socket.once('close', onBrowserGone);

    upstreamReq.on('error', (err) => {
      settle(fromUpstreamError(err));
    });
    upstreamReq.on('response', (res) => {
      if (options.dpop !== undefined) keepNonce(options.dpop, res);
      res.resume();
      upstreamReq.destroy();
      const stepUp = res.statusCode === 401 ? options.stepUp?.(req, res.headers['www-authenticate']) : undefined;
      if (stepUp instanceof GatewayError) {
        settle(stepUp);
        return;
      }
      settle(
        new GatewayError('bad_gateway', {
          description: 'The upstream API refused the WebSocket upgrade.',
          cause: new Error(`upstream answered ${res.statusCode ?? 0} to a WebSocket upgrade`),
        }),
      );
    });
    upstreamReq.on('upgrade', (res, upstreamSocket: Duplex, upstreamHead: Buffer) => {
      const upstream = upstreamSocket as Socket;
      if (options.dpop !== undefined) keepNonce(options.dpop, res);
      if (String(res.headers.upgrade ?? '').toLowerCase() !== 'websocket') {
        upstream.destroy();
        settle(new GatewayError('bad_gateway', { description: 'The upstream API refused the WebSocket upgrade.', cause: new Error('upstream switched to another protocol') }));
        return;
      }
      if (!settle()) {
        upstream.destroy();
        return;
      }
      keepOpen(socket);
      keepOpen(upstream);
      // Either side failing or closing ends both: a half-open tunnel helps nobody.
      const end = () => {
        socket.destroy();
        upstream.destroy();
      };
      upstream.on('error', end).on('close', end);
      socket.on('error', end).on('close', end);
      socket.write(switchingProtocols(res, options.isGatewayCookie));
      if (upstreamHead.length > 0) socket.write(upstreamHead);
      if (head.length > 0) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstreamReq.end();
  });
}
