/**
 * Proxied API calls (SPEC §4), one named step after another:
 *
 *   requireCsrf → readSession → attachCredential → forward
 *
 * The request target is already canonical here (app.ts canonicalises it once, at the edge,
 * proxy/canonical-path.ts): routes are matched, and the upstream is called, on that one path.
 *
 * readSession verifies the cookie and reads the record with one GETEX; express-session is not
 * involved on this path (it never writes the session).
 *
 * Served straight from the HTTP server's request event, before Express: a proxied call needs
 * none of Express's request decoration or routing, and skipping it saves CPU and garbage on
 * every call. Failures are handed to Express (`fail`) so that they get the one error shape and
 * the gateway's own headers. Bodies stream through untouched.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Runtime } from '../runtime.js';
import { GatewayError } from '../errors.js';
import { createCredentialResolver, type LoadedSession } from '../proxy/bearer.js';
import { fromUpstreamError, UPSTREAM_ERROR_KINDS } from '../proxy/errors.js';
import { compileRoutes, needsSession, type CompiledRoute } from '../proxy/routes.js';
import { createDpopProofs } from '../proxy/dpop-proofs.js';
import { createLongLivedAnswers, createStreamLimit, trackStream, type LongLivedAnswers } from '../proxy/streams.js';
import { compileTrust } from '../proxy/trust.js';
import { createUpstream, type Retry, type Upstream } from '../proxy/upstream.js';
import { createRelocation, DROPPED_BECAUSE } from '../proxy/location.js';
import { endpointOf } from './endpoints.js';
import { canonicalTarget, refusedPath } from '../proxy/canonical-path.js';
import type { RequestTracing } from './request-tracing.js';
import { failureLogGate } from '../clock.js';
import { createUpgradeHandler, type UpgradeHandler } from './websocket.js';
import { clearSessionCookie, type SessionReader } from './session-cookie.js';
import { isSessionGone } from '../session/gone.js';
import { RECENT_END_MS } from '../session/events.js';
import { createStepUp, type StepUpListener } from './step-up.js';

export interface ProxyRoutes {
  /** Serves the request when its path is under a route and returns true; false otherwise. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  upgrade: UpgradeHandler;
}

export interface ProxyHooks {
  /** Answers a failed call of `route` with the gateway's error response (or cuts a started one). */
  fail(req: IncomingMessage, res: ServerResponse, err: unknown, route?: string): void;
  /** Request metrics, under the route's path. */
  meter(req: IncomingMessage, res: ServerResponse, label: string): void;
  /** An answer counted without a response object (a WebSocket upgrade's). */
  record(label: string, method: string, status: number, startedAt: number): void;
  /** Told of each 401 step_up_required (RFC 9470), e.g. to send `step-up-required` on /auth/events. */
  stepUpRequired?: StepUpListener;
  /** Request spans, when tracing is on (request-tracing.ts); absent: no per-call work. */
  tracing?: RequestTracing;
  /** The cookie-verifying session reader, shared with the gateway's other readers (one memo). */
  readSession: SessionReader;
}

/**
 * The session a call ran for: its long-lived answer is held with it (proxy/streams.ts), a retry
 * renews its token, and an upstream's step-up challenge is told to it (sessionDigestOf).
 */
const OWNER = Symbol('owner');
type Owned = IncomingMessage & { [OWNER]?: LoadedSession };

/** Notes the session on the request when it is signed in (the object itself: no allocation per call). */
function own(req: IncomingMessage, session: LoadedSession | undefined): void {
  if (session?.auth && session.tokens?.sealed) (req as Owned)[OWNER] = session;
}

/**
 * The path of a request target already made canonical at the edge (app.ts); undefined for a
 * target that is not origin-form (refused there, never served here).
 */
function pathOf(url: string | undefined): string | undefined {
  if (url === undefined || url.charCodeAt(0) !== 47 /* / */) return undefined;
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** Between a call's session read and the start of its head deadline, at most (a margin). */
const HEAD_MARGIN_MS = 10_000;

export function createProxyRoutes(runtime: Runtime, hooks: ProxyHooks): ProxyRoutes {
  const { config, logger, metrics } = runtime;
  const { routes, match } = compileRoutes(config.routes, config.oidc.dpop);
  const trust = compileTrust(config.server.trustProxy);
  const csrfHeader = config.csrf.headerName.toLowerCase();
  const sessionCookie = config.derived.sessionCookieName;
  const loginCookiePrefix = `${config.derived.loginCookieName}.`;
  const isGatewayCookie = (name: string) => name === sessionCookie || name.startsWith(loginCookiePrefix);
  // An upstream down fails every call to it alike: one line per interval, with the count.
  const mayLogUpstreamError = failureLogGate(runtime.clock);
  const resolveCredential = createCredentialResolver({
    config,
    vault: runtime.vault,
    refresher: runtime.refresher,
    provider: runtime.provider,
    clock: runtime.clock,
    clientTokens: runtime.clientTokens,
    refusals: runtime.refusals,
    dpopNonces: runtime.dpopNonces,
    dpopProofs: createDpopProofs({ nonces: runtime.dpopNonces, clock: runtime.clock }),
  });

  const stepUp = createStepUp({
    config,
    clock: runtime.clock,
    // The session the call ran for. Not the cookie: by the upstream's answer the gateway's cookie
    // has been stripped from the forwarded headers (proxy/headers.ts).
    sessionDigestOf: (req) => (req as Owned)[OWNER]?.digest,
    ...(hooks.stepUpRequired ? { listener: hooks.stepUpRequired } : {}),
  });
  // An upstream's step-up challenge concerns the user's sign-in: mapped on user routes only.
  const mapsStepUp = (route: CompiledRoute) => route.auth === 'user' || route.auth === 'user-optional';

  const retryFor =
    (route: CompiledRoute): Retry =>
    async (req, res, refused) => {
      try {
        return await resolveCredential.renew(route, (req as Owned)[OWNER], refused);
      } catch (err) {
        // A retry runs for a session that was read: its cookie came.
        forgetCookieIfSignedOut(res, err, (req as Owned)[OWNER] !== undefined);
        throw err;
      }
    };

  const publicUrl = new URL(config.server.publicUrl);
  const relocation = createRelocation({
    routes,
    match,
    publicUrl,
    isGatewayPath: (path) => endpointOf(path, config.server.authPath) !== '/*',
    onDropped: (route, because) => {
      const suppressed = mayLogUpstreamError(`location ${because} ${route.path}`);
      if (suppressed !== undefined) logger.warn({ event: 'upstream_location_dropped', route: route.path, because, suppressed }, `${DROPPED_BECAUSE[because]}; its Location was dropped (said once per 10 s per route and reason)`);
    },
  });

  const tracing = hooks.tracing;
  const streamDeps = { held: runtime.held, metrics, clock: runtime.clock };
  const streamLimit = createStreamLimit();
  for (const route of routes) {
    metrics.openProxiedStreams.set({ route: route.path }, 0);
    // At 0 from the start (README, Metrics): a series that appears with its first errors has
    // them left out of every rate(), the alert's included.
    for (const kind of UPSTREAM_ERROR_KINDS) metrics.upstreamErrors.inc({ route: route.path, kind }, 0);
  }
  const longLived = new Map<string, LongLivedAnswers>(
    routes.map((route) => {
      // Its answers' heads may come after a session's end is forgotten: checked as held. With a
      // margin: the session is read before the call waits for a connection and is sent.
      const verify = route.timeoutSeconds * 1000 + HEAD_MARGIN_MS >= RECENT_END_MS;
      return [
        route.path,
        createLongLivedAnswers((res) => {
          const owner = (res.req as Owned)[OWNER];
          if (owner !== undefined) trackStream(streamDeps, { digest: owner.digest, auth: owner.auth, verify }, res, route.path);
        }),
      ];
    }),
  );
  const upstreams = new Map<string, Upstream>(
    routes.map((route) => {
      const trace = tracing?.upstream(route.path);
      return [
        route.path,
        createUpstream({
          route,
          ...(trace ? { trace } : {}),
          trust,
          stripRequestHeaders: config.server.stripRequestHeaders,
          publicUrl,
          isGatewayCookie,
          relocate: relocation(route),
          csrfHeader,
          ...(mapsStepUp(route) ? { stepUp: (req: IncomingMessage, header: string | undefined) => stepUp.fromUpstream(req, header, route.dpop ? 'dpop' : 'bearer') } : {}),
          // Only a request that carried a token can be rejected for it. The renewal is bounded (only
          // a still-current token, once per cooldown, shared in Redis); otherwise 'pass': the
          // upstream's 401 goes to the browser unchanged. An API key is not renewed.
          ...(route.auth !== 'apiKey' ? { retry: retryFor(route) } : {}),
          // Only a call made for a session is held with it: routes that read none are not asked.
          ...(needsSession(route)
            ? {
                onLongLived(req: Owned, res: ServerResponse, kind: 'event-stream' | 'open-ended') {
                  const owner = req[OWNER];
                  if (owner === undefined) return undefined;
                  const refused = kind === 'event-stream' ? streamLimit.admit(owner, res) : undefined;
                  if (refused === undefined) (longLived.get(route.path) as LongLivedAnswers).started(res, kind);
                  return refused;
                },
              }
            : {}),
          onError(err, req, res) {
            // A GatewayError here comes from the refresh before a retry (e.g. the grant is gone),
            // not from the upstream.
            const error = err instanceof GatewayError ? err : fromUpstreamError(err);
            trace?.failed(req, error.code);
            if (!(err instanceof GatewayError)) {
              metrics.upstreamErrors.inc({ route: route.path, kind: error.code });
              const suppressed = mayLogUpstreamError(`${error.code} ${route.path}`);
              if (suppressed !== undefined) {
                logger.warn({ event: 'upstream_error', route: route.path, code: error.code, err, suppressed }, 'upstream call failed (said once per 10 s per route and code)');
              }
            }
            if ('headersSent' in res) hooks.fail(req, res, error, route.path);
            else res.destroy();
          },
        }),
      ];
    }),
  );

  const { readSession } = hooks;
  const websockets = createUpgradeHandler({
    config,
    match,
    upstreams,
    resolveCredential,
    // Noted as read, as a call's is: an upstream's step-up challenge to the handshake is told
    // on the session's events (a browser's WebSocket cannot read the 401).
    readSession: async (req) => {
      const session = await readSession(req);
      own(req, session);
      return session;
    },
    held: runtime.held,
    logger,
    metrics,
    record: hooks.record,
    checkStepUp: stepUp.checkRoute,
    streamLimit,
    clock: runtime.clock,
  });
  runtime.onClose(() => {
    websockets.close();
    for (const upstream of upstreams.values()) upstream.close();
    for (const answers of longLived.values()) answers.close();
  });

  /**
   * A session whose grant is gone (or whose tokens no longer open) should not keep its cookie.
   * Only a session this process read (`read`: its cookie verified, its record opened): a cookie
   * or record it cannot read may be another instance's, signed or sealed with a key a newer
   * config added (a key roll under way), and clearing it signed the user out for good. A session
   * that something else ended (isSessionGone) keeps it too: the browser may have signed in again
   * meanwhile, and this late answer's clearing Set-Cookie would delete the new session's cookie,
   * which has the same name.
   */
  function forgetCookieIfSignedOut(res: ServerResponse, err: unknown, read: boolean): void {
    if (read && err instanceof GatewayError && err.code === 'login_required' && !isSessionGone(err) && !res.headersSent) clearSessionCookie(res, config);
  }

  async function attachCredential(req: IncomingMessage, res: ServerResponse, route: CompiledRoute) {
    const session = needsSession(route) ? await readSession(req) : undefined;
    if (route.requireSession && !(session?.auth && session.tokens?.sealed)) throw new GatewayError('login_required');
    // A route without stepUp costs this one property read.
    if (route.stepUp) stepUp.checkRoute(req, route, session);
    own(req, session);
    try {
      return await resolveCredential(route, session);
    } catch (err) {
      forgetCookieIfSignedOut(res, err, session?.auth !== undefined);
      throw err;
    }
  }

  async function serve(req: IncomingMessage, res: ServerResponse, route: CompiledRoute): Promise<void> {
    // A TRACE is answered with the request as received, the Authorization the gateway added
    // included (Apache's TraceEnable is on by default): whoever holds the cookie would read the
    // token itself. Browsers cannot send one, so nothing an SPA does is refused. (Node's parser
    // refuses IIS's TRACK, with 400.)
    if (req.method === 'TRACE') throw new GatewayError('method_not_allowed');
    if (req.headers[csrfHeader] !== '1') throw new GatewayError('csrf_check_failed');
    const credential = await attachCredential(req, res, route);
    await (upstreams.get(route.path) as Upstream).forward(req, res, credential);
  }

  function handle(req: IncomingMessage, res: ServerResponse): boolean {
    const path = pathOf(req.url);
    const route = path === undefined ? undefined : match(path);
    if (!route || path === undefined) return false;
    if ('refused' in route) {
      hooks.fail(req, res, refusedPath(route));
      return true;
    }
    hooks.meter(req, res, route.path);
    const failed = (err: unknown) => hooks.fail(req, res, err, route.path);
    if (tracing) tracing.proxyCall(req, res, route.path, () => serve(req, res, route).catch(failed));
    else serve(req, res, route).catch(failed);
    return true;
  }

  /** The route an upgrade is for, to name its span (websocket.ts decides whether it is served). */
  function upgradeRoute(url: string | undefined): string | undefined {
    const target = canonicalTarget(url);
    const path = typeof target === 'string' ? pathOf(target) : undefined;
    const route = path === undefined ? undefined : match(path);
    return route === undefined || 'refused' in route ? undefined : route.path;
  }
  const upgrade: UpgradeHandler = tracing
    ? (req, socket, head) => tracing.upgrade(req, socket, upgradeRoute(req.url), () => websockets.handle(req, socket, head))
    : websockets.handle;
  return { handle, upgrade };
}
