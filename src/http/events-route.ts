/**
 * GET /auth/events (SPEC §3, issue 16): a server-sent-event stream of the current session's
 * events, for the SPA:
 *
 *   session-ending     { secondsLeft }                       before the absolute timeout
 *   signed-out         { reason }                            then the stream ends
 *   step-up-required   { acr_values, max_age, loginUrl }     an upstream asked for more
 *
 * CSRF: browsers' EventSource cannot add the CSRF header, so the rules are a WebSocket
 * upgrade's: `Origin`, when sent, must be publicUrl's, and `Sec-Fetch-Site`, when sent, must be
 * same-origin. The stream carries nothing beyond what /auth/user shows (no token, no claim):
 * reasons, a countdown and the step-up parameters.
 *
 * Reconnects: `retry:` tells EventSource how soon, and event ids count on from the browser's
 * `Last-Event-ID`, so ids never go back across a reconnect (or a gateway restart). Nothing is
 * replayed: a `signed-out` missed while disconnected shows as a 401 on the reconnect, and the
 * countdown is sent again on connect.
 *
 * Bounds: one cookie could otherwise open thousands of streams, each a socket and a hold on one
 * process. A session may hold `maxPerSession` streams here (a user with many tabs), a user
 * `maxPerUser` over all their sessions (a user may hold any number of sessions: signed in again
 * and again, one account filled the process's cap), the process `maxOpen`; past any the stream
 * is refused with 429 rate_limited and Retry-After, not the
 * oldest closed (closing the oldest would make two sets of tabs take turns forever, each
 * reconnect evicting another). One heartbeat timer serves every open stream.
 */
import { MAX_TIMER_MS } from '../clock.js';
import type { IncomingMessage } from 'node:http';
import { Router, type Request, type Response } from 'express';
import type { Config } from '../config/load.js';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../observability/metrics.js';
import type { LoadedSession } from '../proxy/bearer.js';
import type { SessionEvent, SessionEvents } from '../session/events.js';
import type { HeldSessions } from '../session/held.js';
import { sessionEndsAt } from '../session/data.js';
import { userDigest } from '../session/user-index.js';
import { createOpenCount } from '../proxy/streams.js';

export interface EventsRouteDeps {
  config: Config;
  readSession: (req: IncomingMessage) => Promise<LoadedSession | undefined>;
  events: SessionEvents;
  held: HeldSessions;
  metrics: Metrics;
  clock: () => number;
  /** Comment lines keep idle proxies from cutting the stream (default 15 s). */
  heartbeatMs?: number;
  /** How long before the absolute timeout `session-ending` is sent (default 300 s). */
  endingNoticeSeconds?: number;
  /** EventSource's reconnect delay (default 3000 ms). */
  retryMs?: number;
  /** Streams one session may hold open on this process; past it, 429 (default 8). */
  maxPerSession?: number;
  /** Streams one user may hold open on this process, over all their sessions; past it, 429 (default 32). */
  maxPerUser?: number;
  /** Streams this process holds open in all; past it, 429 (default 10,000). */
  maxOpen?: number;
}

/** How long a refused stream is told to wait (Retry-After, seconds). */
const RETRY_AFTER_SECONDS = 30;

const LAST_EVENT_ID = /^\d{1,15}$/;

/** The `data:` of an event: the SPEC's fields only, whatever else the event object holds. */
function payloadOf(event: SessionEvent): Record<string, unknown> | undefined {
  switch (event.type) {
    case 'signed-out':
      return { reason: event.reason };
    case 'step-up-required':
      return { acr_values: event.acr_values ?? null, max_age: event.max_age ?? null, loginUrl: event.loginUrl };
    default:
      return undefined; // internal kinds (tokens-refreshed) are not the SPA's business
  }
}

export function createEventsRoute(deps: EventsRouteDeps): Router & { close(): void } {
  const { config, metrics } = deps;
  const heartbeatMs = deps.heartbeatMs ?? 15_000;
  const noticeMs = (deps.endingNoticeSeconds ?? 300) * 1000;
  const { absoluteTimeoutSeconds } = config.session;
  // Below the six connections a browser opens to one host over HTTP/1.1: a stream holds one for
  // good, and six tabs with one each left no connection for any call of any tab (found by a red
  // team in Chromium). The fifth tab is refused (429) and goes on without live events.
  const maxPerSession = deps.maxPerSession ?? 4;
  const maxPerUser = deps.maxPerUser ?? 32;
  const maxOpen = deps.maxOpen ?? 10_000;
  const open = new Set<Response>();
  // Open streams by session digest and by user digest, each counted until it closes.
  const perSession = createOpenCount();
  const perUser = createOpenCount();
  const router = Router();

  /**
   * Each stream's `session-ending` notice not yet sent, by when it is due on the gateway's clock.
   * Its own timer counts elapsed time, which a forward step of the wall clock skips: the
   * heartbeat sends what such a step made due (as held.ts's sweep ends what it made expire).
   */
  const notices = new Map<Response, { dueAt: number; send: () => void }>();
  // One timer for every stream, running only while some are open.
  let heartbeat: NodeJS.Timeout | undefined;
  function track(res: Response): void {
    open.add(res);
    heartbeat ??= setInterval(() => {
      // An ended stream stays here until its connection closes: never write after its end.
      for (const r of open) if (!r.writableEnded) r.write(': heartbeat\n\n');
      const now = deps.clock();
      for (const notice of notices.values()) if (now >= notice.dueAt) notice.send();
    }, heartbeatMs);
  }
  function untrack(res: Response): void {
    open.delete(res);
    if (open.size === 0) {
      clearInterval(heartbeat);
      heartbeat = undefined;
    }
  }
  /** Counts `res` as its session's and its user's until it closes (a refused one closes with its 429), or throws 429. */
  function admit(res: Response, digest: string, user: string): void {
    const tooMany = !perSession.admit(digest, res, maxPerSession)
      ? 'This session has too many event streams open.'
      : !perUser.admit(user, res, maxPerUser)
        ? 'This user has too many event streams open.'
      : open.size >= maxOpen
        ? 'This gateway holds too many event streams.'
        : undefined;
    if (tooMany) throw new GatewayError('rate_limited', { description: tooMany, headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) } });
  }

  function checkRequest(req: Request): number {
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== config.derived.publicOrigin) {
      throw new GatewayError('csrf_check_failed', { description: 'The Origin of this event stream is not allowed.' });
    }
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin') {
      throw new GatewayError('csrf_check_failed', { description: 'This event stream must be opened by the same origin.' });
    }
    const last = req.headers['last-event-id'];
    if (last === undefined || last === '') return 0;
    if (typeof last !== 'string' || !LAST_EVENT_ID.test(last)) {
      throw new GatewayError('invalid_request', { description: 'Last-Event-ID must be a number this stream sent.' });
    }
    return Number(last);
  }

  router.get('/events', async (req: Request, res: Response) => {
    let id = checkRequest(req);
    const session = await deps.readSession(req);
    if (!session?.auth || !session.tokens?.sealed) throw new GatewayError('login_required');
    // The client left while its session was read: its 'close' has been and gone, so nothing
    // tracked from here would ever be released (a hold, the gauge, a place under the caps).
    if (req.socket.destroyed) return;
    const { digest } = session;
    const { auth } = session;
    admit(res, digest, userDigest(auth.iss, auth.sub));

    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      // nginx and some other proxies buffer responses unless told not to.
      'X-Accel-Buffering': 'no',
    });
    res.write(`retry: ${deps.retryMs ?? 3000}\n\n`);
    const send = (type: string, data: Record<string, unknown>) => {
      // Ended (signed-out, a drain) but not yet closed: a slow reader can hold that open, and a
      // write after end is an uncaught error that stops the process.
      if (res.writableEnded) return;
      id += 1;
      res.write(`id: ${id}\nevent: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
    };

    track(res);
    metrics.openEventStreams.inc();
    const endsAt = sessionEndsAt(auth, absoluteTimeoutSeconds);
    let noticeTimer: NodeJS.Timeout | undefined;
    const notice = () => {
      clearTimeout(noticeTimer);
      notices.delete(res);
      send('session-ending', { secondsLeft: Math.max(0, Math.round((endsAt - deps.clock()) / 1000)) });
    };
    const untilNotice = endsAt - noticeMs - deps.clock();
    if (untilNotice <= 0) notice();
    else {
      // Past setTimeout's range (a lifetime of weeks) it would fire at once: the heartbeat sends it.
      if (untilNotice <= MAX_TIMER_MS) noticeTimer = setTimeout(notice, untilNotice);
      notices.set(res, { dueAt: endsAt - noticeMs, send: notice });
    }

    const release = deps.held.hold(digest, auth, ({ reason, endedAt }) => {
      send('signed-out', { reason });
      res.end();
      metrics.sessionEndToClose.observe({ stream: 'event_stream' }, Math.max(0, deps.clock() - endedAt) / 1000);
    });
    const unsubscribe = deps.events.subscribe(digest, (event) => {
      if (event.type === 'signed-out') return; // the hold above says it, once, and ends the stream
      const data = payloadOf(event);
      if (data) send(event.type, data);
    });
    res.once('close', () => {
      clearTimeout(noticeTimer);
      notices.delete(res);
      release();
      unsubscribe();
      untrack(res);
      metrics.openEventStreams.dec();
    });
  });

  return Object.assign(router, {
    close() {
      for (const res of [...open]) res.end();
    },
  });
}
