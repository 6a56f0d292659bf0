/**
 * The one home of http-proxy-middleware: one proxy per route, over a keep-alive agent, with the
 * gateway's own header rules, deadline and error mapping. HPM's default plugins are ejected
 * (its logger does per-request work and its error page is not our error shape); the two that
 * keep a proxy safe are put back explicitly. Every answer is written by passThrough (never by
 * httpxy's writer), and WebSocket handshakes go through websocket-tunnel.ts (httpxy would relay
 * an upstream's non-101 answer to the browser).
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import { Readable, type Duplex } from 'node:stream';
import {
  createProxyMiddleware,
  debugProxyErrorsPlugin,
  proxyEventsPlugin,
} from 'http-proxy-middleware';
import { needsSession, type CompiledRoute } from './routes.js';
import { createRouteAgent } from './route-agent.js';
import type { TrustHop } from './trust.js';
import { createOutgoing } from './outgoing.js';
import { openTunnel } from './websocket-tunnel.js';
import { retryForNonce, type DpopAttachment } from './dpop-proofs.js';
import { longLivedKind } from './streams.js';
import type { Relocate } from './location.js';
import { proxyTarget } from './proxy-target.js';
import { DPOP, isBodyless, NONCE_RETRIED, passThrough, POOLED, rejectsToken, resetOnReuse, RESENT, RETRY, staleConnection, TARGET, type Retriable } from './upstream-call.js';

export interface UpstreamOptions {
  route: CompiledRoute;
  trust: TrustHop;
  /** server.stripRequestHeaders: request headers never forwarded, besides the built-in list (headers.ts). */
  stripRequestHeaders?: readonly string[];
  publicUrl: URL;
  /** True for cookie names the gateway owns (never forwarded, never overwritten by upstreams). */
  isGatewayCookie: (name: string) => boolean;
  /** How an answer's Location is passed on (location.ts); absent: as sent. */
  relocate?: Relocate;
  /** The CSRF header every proxied call carries (config.csrf.headerName): answers vary on it. */
  csrfHeader: string;
  /**
   * Told of each answer that may stay open for long (streams.ts), before its head is passed on;
   * an error refuses it (answered instead, the upstream's answer cut).
   */
  onLongLived?: (req: http.IncomingMessage, res: http.ServerResponse, kind: 'event-stream' | 'open-ended') => Error | undefined;
  /** Called when the upstream could not be reached or did not answer in time. */
  onError: (err: Error, req: http.IncomingMessage, res: http.ServerResponse | Socket) => void;
  /**
   * RFC 9470: given an upstream 401's WWW-Authenticate, the error to answer instead (an
   * insufficient_user_authentication challenge), or undefined to pass the 401 on. Then the
   * upstream's answer is discarded unread: neither its headers nor its body reach the browser.
   */
  stepUp?: (req: http.IncomingMessage, wwwAuthenticate: string | undefined) => Error | undefined;
  /** Tracing's hooks (http/request-tracing.ts); absent when tracing is off: no per-call work. */
  trace?: UpstreamTrace;
  /** How a refused credential is renewed for one retry; absent: the route's 401s pass as they are. */
  retry?: Retry;
}

/** The upstream call's span (request-tracing.ts): started once the headers are prepared (it writes its traceparent). */
export interface UpstreamTrace {
  start(req: http.IncomingMessage): void;
  answered(req: http.IncomingMessage, status: number): void;
  failed(req: http.IncomingMessage, code: string): void;
  /** A WebSocket handshake: ends the span with 101 or the error `opened` rejects with. */
  settled(req: http.IncomingMessage, opened: Promise<void>): Promise<void>;
}

/** Credentials for one proxied request: the header to set, decided before forwarding. */
export interface Credential {
  header: string;
  value: string;
  /** RFC 9449: the request also carries a proof, made afresh for each attempt. */
  dpop?: DpopAttachment;
}

/**
 * Gets a fresh credential after the upstream rejected `refused` (refresh once, retry once), or
 * 'pass': no retry, the upstream's answer goes to the browser as it is. One per route: what the
 * call needs rides on the request, so nothing is built per call for a retry that rarely comes.
 */
export type Retry = (req: http.IncomingMessage, res: http.ServerResponse, refused: Credential) => Promise<Credential | 'pass'>;

export interface Upstream {
  forward(req: http.IncomingMessage, res: http.ServerResponse, credential: Credential | undefined): Promise<void>;
  /**
   * Opens the upstream WebSocket: resolves once the browser has the upstream's 101; rejects
   * with a GatewayError (nothing written to the socket yet) when there is no 101 to pass on.
   */
  upgrade(req: http.IncomingMessage, socket: Socket, head: Buffer, credential: Credential | undefined): Promise<void>;
  close(): void;
}

/**
 * A 101 answer to a plain call (the gateway's own upgrades go through websocket-tunnel.ts). With
 * no 'upgrade' listener Node destroys the socket and the request emits only 'close': no
 * 'response', no 'error', and the deadline takes a destroyed request for settled, so the
 * browser's call would wait for ever. Heard here, it becomes the request's error, handled by
 * httpxy's own error listener like any other: 502 bad_gateway. One shared listener, no closure.
 */
function switchedProtocols(this: http.ClientRequest, _res: http.IncomingMessage, socket: Duplex): void {
  socket.destroy();
  this.emit('error', new Error('the upstream answered a plain request with 101 Switching Protocols'));
}

export function createUpstream(options: UpstreamOptions): Upstream {
  const { route, isGatewayCookie, trace, retry, relocate, csrfHeader } = options;
  // The browser's request carried its cookie where the upstream's carried a credential only a
  // session gets (the user's token, or the gateway's own on a requireSession route).
  const forCookie = needsSession(route);
  const target = new URL(route.target);
  const routeAgent = createRouteAgent({
    secure: target.protocol === 'https:',
    maxConnections: route.maxConnections,
    timeoutMs: route.timeoutSeconds * 1000,
    onQueuedTimeout: (err, req, res) => options.onError(err, req, res),
  });
  const { agent } = routeAgent;
  const web = routeAgent.sending((req, res, opts: object) => (server as ProxyServer).web(req, res, opts));
  const outgoing = createOutgoing({ ...options, target });
  const { upstreamTarget, addProof } = outgoing;

  // HPM's options. The middleware it returns is never called (forward() calls the proxy server it
  // builds, which a plugin below captures): only its plugins and event handlers are used.
  const base = {
    target,
    changeOrigin: true,
    xfwd: false,
    // Never let HPM subscribe to the server's upgrade event itself: it would proxy every upgrade
    // with no session or Origin check. The gateway's own upgrade handler calls upgrade().
    ws: false,
    agent,
    ejectPlugins: true,
  };
  type ProxyServer = { web(req: http.IncomingMessage, res: http.ServerResponse, opts: object): Promise<void> };
  let server: ProxyServer | undefined;
  /**
   * What the proxy server needs per call. httpxy copies the options object on every call, so
   * http-proxy-middleware's own keys (plugins, handlers, path rewrite) stay out of it.
   */
  const callOptions = { target: proxyTarget(target), changeOrigin: true, xfwd: false, agent, selfHandleResponse: true };
  /**
   * The same request once more (req was consumed: an empty stream stands in for its body). Only
   * body-less requests are resent; their framing headers go too, so that no stale length can
   * ever make the upstream read the connection's next request as this one's body.
   */
  /** The 'close' listeners httpxy and HPM add to the browser's answer per attempt. */
  const ATTEMPT_LISTENERS = 4;
  const resend = (req: http.IncomingMessage, res: http.ServerResponse) => {
    // Each attempt adds its listeners to the same answer, bounded by the attempts (a retry, a
    // resend, a nonce retry): with the gateway's own, a retried call crossed Node's default of
    // 10 and printed a MaxListenersExceededWarning to stderr for each such call.
    res.setMaxListeners(res.getMaxListeners() + ATTEMPT_LISTENERS);
    if (req.headers['content-length'] !== undefined) delete req.headers['content-length'];
    if (req.headers['transfer-encoding'] !== undefined) delete req.headers['transfer-encoding'];
    return server === undefined ? undefined : web(req, res, { ...callOptions, buffer: Readable.from([]) });
  };
  const on = {
    // Once a connection is assigned (the deadline was armed before, in route-agent.ts).
    proxyReq(proxyReq: http.ClientRequest, req: http.IncomingMessage) {
      proxyReq.on('upgrade', switchedProtocols);
      (req as Retriable)[POOLED] = proxyReq.reusedSocket;
    },
    error(err: Error, req: http.IncomingMessage, res: http.ServerResponse | Socket) {
      // Each idle connection found dead one call at a time cost a call each, a POST's a 502,
      // and a GET's resend drew another dead one (found by the flapping red team).
      if (resetOnReuse(err, req as Retriable)) routeAgent.dropIdle();
      if (staleConnection(err, req as Retriable, res)) {
        (req as Retriable)[RESENT] = true;
        // A new proof too: the upstream may have read the first one (its jti is spent).
        const proofs = (req as Retriable)[DPOP];
        if (proofs !== undefined) addProof(req, proofs.attachment);
        // The same proxy again (keeping the 401 retry, if any), with an empty stand-in body, on
        // a new connection: the idle ones were just closed.
        resend(req, res as http.ServerResponse)?.catch((again: unknown) => {
          options.onError(again instanceof Error ? again : new Error(String(again)), req, res);
        });
        return;
      }
      options.onError(err, req, res);
    },
  };
  const pass = (proxyRes: http.IncomingMessage, req: http.IncomingMessage, res: http.ServerResponse) => {
    const kind = options.onLongLived === undefined ? undefined : longLivedKind(proxyRes, req.method);
    const refused = kind === undefined ? undefined : options.onLongLived?.(req, res, kind);
    if (refused !== undefined) {
      proxyRes.destroy();
      options.onError(refused, req, res);
      return;
    }
    try {
      passThrough(proxyRes, res, isGatewayCookie, forCookie, relocate, csrfHeader);
    } catch (err) {
      // Whatever of an upstream's answer Node will not write fails this call (502), never the
      // process: this runs in a socket event, where a throw is uncaught.
      proxyRes.destroy();
      options.onError(err instanceof Error ? err : new Error(String(err)), req, res);
    }
  };
  // The deadline is for the response head only: a long download or an event stream that has
  // started answering is never cut by it.
  const answered = (proxyRes: http.IncomingMessage) => {
    const proxyReq = (proxyRes as { req?: http.ClientRequest }).req;
    if (proxyReq) routeAgent.answered(proxyReq);
  };

  // Everything streams through this one. A body-less request that may be retried carries the
  // credential it was sent with (RETRY): its response head is inspected before it is passed on,
  // so a 401 invalid_token can be answered by one renewal and one retry (SPEC §4). The refused
  // credential rides on the request itself, not in a WeakMap keyed by request: a collection
  // keyed per request gets its tables rehashed into the old generation (see deadlines.ts).
  createProxyMiddleware<http.IncomingMessage, http.ServerResponse>({
    ...base,
    selfHandleResponse: true,
    plugins: [
      debugProxyErrorsPlugin,
      proxyEventsPlugin,
      (instance) => {
        server = instance as unknown as ProxyServer;
      },
    ],
    on: {
      ...on,
      proxyRes(proxyRes, req, res) {
        answered(proxyRes);
        // A 1xx is never an answer (100 and 103 come as 'information'); a 101 without Upgrade
        // arrives here, and its connection speaks another protocol now: never pooled, never relayed.
        // Past 599 is no HTTP status (RFC 9110 §15), though Node's parser takes any three digits.
        const status = proxyRes.statusCode ?? 0;
        if (status < 200 || status > 599) {
          proxyRes.socket.destroy();
          options.onError(new Error(`the upstream answered a plain request with ${status}`), req, res);
          return;
        }
        const proofs = (req as Retriable)[DPOP];
        if (proofs !== undefined && retryForNonce(proofs, proxyRes, (req as Retriable)[NONCE_RETRIED] === true)) {
          (req as Retriable)[NONCE_RETRIED] = true;
          proxyRes.resume();
          addProof(req, proofs.attachment);
          resend(req, res)?.catch((err: unknown) => options.onError(err instanceof Error ? err : new Error(String(err)), req, res));
          return;
        }
        if (proxyRes.statusCode === 401 && options.stepUp) {
          const stepUp = options.stepUp(req, proxyRes.headers['www-authenticate']);
          if (stepUp) {
            // Drained for its connection's sake only while the browser's answer is open: the error
            // handler ends that answer at once, before httpxy ties the upstream's to it, and a body
            // that never ended was read for ever (a complete one keeps its pooled connection).
            proxyRes.resume();
            res.once('close', () => proxyRes.destroy());
            trace?.answered(req, 401);
            options.onError(stepUp, req, res);
            return;
          }
        }
        const refused = (req as Retriable)[RETRY];
        if (refused === undefined || retry === undefined || !rejectsToken(proxyRes)) {
          trace?.answered(req, proxyRes.statusCode ?? 502);
          pass(proxyRes, req, res);
          return;
        }
        (req as Retriable)[RETRY] = undefined;
        // The answer is held (not read) until the retry is decided: it may be passed through.
        retry(req, res, refused)
          .then((credential) => {
            if (credential === 'pass') {
              trace?.answered(req, proxyRes.statusCode ?? 502);
              return pass(proxyRes, req, res);
            }
            proxyRes.resume();
            delete req.headers[refused.header];
            if (req.headers.dpop !== undefined) delete req.headers.dpop;
            req.headers[credential.header] = credential.value;
            if (credential.dpop) addProof(req, credential.dpop);
            // req was consumed by the first attempt; an empty stream stands in for its body.
            return resend(req, res);
          })
          .catch((err: unknown) => {
            proxyRes.resume();
            options.onError(err instanceof Error ? err : new Error(String(err)), req, res);
          });
      },
    },
  });

  return {
    forward(req, res, credential) {
      outgoing.prepare(req, credential);
      trace?.start(req);
      if (retry !== undefined && credential !== undefined && isBodyless(req)) (req as Retriable)[RETRY] = credential;
      // HPM's per-call middleware (path filter, router, IPv6 target check, an options copy and
      // three awaits) decides nothing here: the route was matched and its target parsed already.
      // The proxy server HPM built (its plugins and the handlers above) serves the call, as
      // resend() does; the path rule is applied here, as HPM's pathRewrite would.
      (req as Retriable)[TARGET] = req.url ?? '/';
      req.url = upstreamTarget(req.url ?? '/');
      return web(req, res, callOptions).catch((err: unknown) => {
        on.error(err instanceof Error ? err : new Error(String(err)), req, res);
      });
    },
    upgrade(req, socket, head, credential) {
      outgoing.prepare(req, credential);
      trace?.start(req);
      const path = upstreamTarget(req.url ?? '/');
      const opened = openTunnel(req, socket, head, { target, path, timeoutMs: route.timeoutSeconds * 1000, isGatewayCookie, dpop: credential?.dpop, stepUp: options.stepUp });
      return trace ? trace.settled(req, opened) : opened;
    },
    close() {
      routeAgent.close();
    },
  };
}
