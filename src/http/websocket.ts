/**
 * WebSocket upgrades (SPEC §4). The request target is made canonical first, by the same rules
 * as every HTTP request (proxy/canonical-path.ts): the route is matched, and the upstream
 * handshake sent, on that one path. Browsers cannot add the CSRF header to an upgrade, so the
 * checks are: the route allows WebSockets, `Origin` equals publicUrl, and the session cookie
 * names a live session. The upstream handshake carries the Bearer token. An open socket's
 * session is held (session/held.ts): when it ends (logout, back-channel logout,
 * DELETE /auth/sessions, a refused refresh, timeouts), on whichever instance, the socket is
 * closed at once, with no per-socket polling of Redis.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import type { Config } from '../config/load.js';
import { GatewayError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { CredentialResolver, LoadedSession } from '../proxy/bearer.js';
import { canonicalTarget, refusedPath } from '../proxy/canonical-path.js';
import { announcesBody } from '../proxy/headers.js';
import { asksForWebSocket } from './server-options.js';
import type { CompiledRoute, RouteMatcher } from '../proxy/routes.js';
import type { Upstream } from '../proxy/upstream.js';
import { tooManyHeaderFields } from './header-fields.js';
import { UPSTREAM_ERROR_KINDS } from '../proxy/errors.js';
import type { HeldSessions } from '../session/held.js';
import { createOpenCount, STREAM_RETRY_AFTER, type StreamLimit } from '../proxy/streams.js';
import { failureLogGate } from '../clock.js';

export type UpgradeHandler = (req: IncomingMessage, socket: Socket, head: Buffer) => void;

export interface WebSocketDeps {
  config: Config;
  match: RouteMatcher;
  upstreams: ReadonlyMap<string, Upstream>;
  resolveCredential: CredentialResolver;
  readSession: (req: IncomingMessage) => Promise<LoadedSession | undefined>;
  held: HeldSessions;
  logger: Logger;
  metrics: Metrics;
  /** Counts an upgrade's answer as any call's is (metrics-route.ts RequestMetrics.record). */
  record: (label: string, method: string, status: number, startedAt: number) => void;
  /** A route's stepUp (RFC 9470), judged on the handshake as on any call; default: none judged. */
  checkStepUp?: (req: IncomingMessage, route: CompiledRoute, session: LoadedSession | undefined) => void;
  /** A session's long-lived connections, its proxied event streams counted with them (proxy/streams.ts). */
  streamLimit: StreamLimit;
  clock: () => number;
}

/** How long a refusal may take to reach a client that does not read it before its socket is cut. */
const REFUSAL_FLUSH_MS = 5_000;

/**
 * Answers a refused upgrade and closes its socket for good. end() alone only sends our FIN: the
 * server allows half-open sockets and an upgraded one has no timeout, so a client that never
 * sends its own FIN would keep the socket (and, after track(), its hold and gauge) for ever.
 * So the socket is destroyed once the answer is flushed, or after a short bound if it never is.
 */
function refuse(socket: Socket, error: GatewayError): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify(error.toBody());
  // The error's own headers too (a 429's Retry-After), as sendError writes them for every other
  // answer; they are the gateway's own values, checked printable since the socket is written raw.
  const extra = Object.entries(error.headers)
    .filter(([, value]) => /^[\x20-\x7e]*$/.test(value))
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  const bound = setTimeout(() => socket.destroy(), REFUSAL_FLUSH_MS);
  bound.unref();
  socket.once('close', () => clearTimeout(bound));
  socket.end(
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ''}\r\n` +
      `Content-Type: application/json\r\nCache-Control: no-store\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}

/**
 * RFC 6455 §4.1: a GET, HTTP/1.1 or later, asking for `websocket`, with no body. Only
 * `Upgrade: websocket` requests get here where Node has shouldUpgradeCallback
 * (http/server-options.ts; older Node hands over every `Connection: Upgrade` request), but
 * whatever their method, version or framing: the tunnel would have made a handshake of a POST,
 * and passed a body's framing headers upstream with its bytes arriving as tunnel data after the 101.
 */
function isWebSocketHandshake(req: IncomingMessage): boolean {
  return (
    req.method === 'GET' &&
    req.httpVersionMajor === 1 &&
    req.httpVersionMinor >= 1 &&
    asksForWebSocket(req) &&
    !announcesBody(req.headers)
  );
}

export function createUpgradeHandler(deps: WebSocketDeps): { handle: UpgradeHandler; close(): void } {
  const { config, logger, metrics } = deps;
  const open = new Set<Socket>();
  /** Tunnels open per route: each is an upstream connection of its own, outside the route's pool. */
  const perRoute = createOpenCount();
  // As for HTTP calls (error-handler.ts): a down upstream fails every upgrade alike; the
  // metrics count each, the log says it once per 10 s per code and route. A bug is always said.
  const mayLog = failureLogGate(deps.clock);

  /**
   * A tunnel is a session's long-lived connection like a proxied event stream (at most
   * MAX_STREAMS_PER_SESSION together), and at most `maxConnections` are open per route: one
   * cookie opened as many as it liked, until the process ran out of file descriptors, and as
   * many connections to an upstream configured for a handful.
   */
  function admit(session: LoadedSession | undefined, route: CompiledRoute, socket: Socket): GatewayError | undefined {
    // Counted until the socket closes, which a refused upgrade's does at once.
    if (!perRoute.admit(route.path, socket, route.maxConnections)) {
      return new GatewayError('rate_limited', { description: 'This API holds as many WebSockets as it may; try again later.', headers: STREAM_RETRY_AFTER });
    }
    return session?.tokens ? deps.streamLimit.admit(session, socket) : undefined;
  }

  function track(session: LoadedSession, socket: Socket, route: string): void {
    open.add(socket);
    metrics.openWebSockets.inc({ route });
    const release = deps.held.hold(session.digest, session.auth, ({ reason, endedAt }) => {
      socket.destroy();
      metrics.sessionEndToClose.observe({ stream: 'websocket' }, Math.max(0, deps.clock() - endedAt) / 1000);
      logger.info({ event: 'websocket_closed', reason: 'session_ended', why: reason, route }, 'closed a WebSocket of an ended session');
    });
    socket.once('close', () => {
      release();
      metrics.openWebSockets.dec({ route });
      open.delete(socket);
    });
  }

  /**
   * Whether the upgrade was switched through (false: the client left first). `at.route`: the
   * route matched, once it is (for the metrics of the answer).
   */
  async function upgrade(req: IncomingMessage, socket: Socket, head: Buffer, at: { route?: string }): Promise<boolean> {
    const crowded = tooManyHeaderFields(req);
    if (crowded) throw crowded;
    const target = canonicalTarget(req.url);
    if (typeof target !== 'string') throw refusedPath(target);
    req.url = target;
    const q = target.indexOf('?');
    const route = deps.match(q === -1 ? target : target.slice(0, q));
    if (route !== undefined && 'refused' in route) throw refusedPath(route);
    if (!route || !route.websocket) throw new GatewayError('not_found', { description: 'WebSocket upgrades are not allowed here.' });
    at.route = route.path;
    if (!isWebSocketHandshake(req)) throw new GatewayError('invalid_request', { description: 'This is not a WebSocket handshake.' });
    if (req.headers.origin !== config.derived.publicOrigin) throw new GatewayError('csrf_check_failed', { description: 'The Origin of this WebSocket is not allowed.' });
    const session = await deps.readSession(req);
    // The client left while its session was read: its 'close' has been and gone, so a hold
    // taken now would never be released.
    if (socket.destroyed) return false;
    if (route.requireSession && !session?.tokens) throw new GatewayError('login_required');
    const crowd = admit(session, route, socket);
    if (crowd) throw crowd;
    // Held from the read on (not after the credential, which may take a refresh): an end heard
    // meanwhile closes it. A refused upgrade destroys the socket, which releases the hold.
    if (session?.tokens) track(session, socket, route.path);
    deps.checkStepUp?.(req, route, session);
    const credential = await deps.resolveCredential(route, session);
    // The client left while the credential was fetched (a refresh may take seconds): its hold
    // is released already, so an upstream WebSocket opened now would never be closed.
    if (socket.destroyed) return false;
    // Before its 101 the upstream's answer is never relayed: a refusal becomes a gateway error.
    await (deps.upstreams.get(route.path) as Upstream).upgrade(req, socket, head, credential);
    return true;
  }

  /**
   * An upgrade counted as any call is, under its route (or `other`): its 101, or the status it
   * was refused with, and an upstream that could not be reached as an upstream error. They were
   * counted nowhere, and a WebSocket route whose upstream was down paged no one (found by the
   * observability red team).
   */
  function count(route: string | undefined, status: number, started: number): void {
    deps.record(route ?? 'other', 'GET', status, started);
  }

  return {
    handle(req, socket, head) {
      socket.on('error', () => socket.destroy());
      const started = performance.now();
      const at: { route?: string } = {};
      upgrade(req, socket, head, at).then(
        (switched) => {
          if (switched) count(at.route, 101, started);
        },
        (err: unknown) => {
          const error = err instanceof GatewayError ? err : new GatewayError('server_error', { cause: err });
          if (error.code === 'server_error') logger.error({ event: 'websocket_refused', code: error.code, err }, 'WebSocket upgrade failed');
          else if (error.status >= 500) {
            const suppressed = mayLog(`${error.code} ${at.route ?? ''}`);
            if (suppressed !== undefined) logger.warn({ event: 'websocket_refused', code: error.code, route: at.route, err, suppressed }, 'WebSocket upgrade failed (said once per 10 s per code and route; suppressed: lines not written since)');
          }
          // A client that left during the handshake was answered nothing, and is no upstream's fault.
          if (!socket.destroyed) {
            count(at.route, error.status, started);
            if (at.route !== undefined && UPSTREAM_ERROR_KINDS.has(error.code)) metrics.upstreamErrors.inc({ route: at.route, kind: error.code });
          }
          refuse(socket, error);
        },
      );
    },
    close() {
      for (const socket of [...open]) socket.destroy();
      open.clear();
    },
  };
}
