/**
 * Proxied responses that may stay open for long, and closing them when their session ends
 * (issue 16). Which responses: an event stream (`text/event-stream`), a body without
 * `Content-Length` (chunked or close-delimited: NDJSON, long polls, downloads of unknown size),
 * or one of 1 MiB or more (a long download). Everything else is an ordinary call that ends on
 * its own within moments: tracking it would put timers and a subscription on the hot path for
 * nothing. Deciding on the response head costs no Redis command and no timer per call.
 *
 * An event stream is held with its session at once. An open-ended body is held only once it has
 * been open for HOLD_AFTER_MS: most chunked answers are ordinary API calls (a compressing or
 * streaming framework leaves out Content-Length) that end within milliseconds, and holding each
 * one cost a subscription, two timers and a gauge update per call. Until then it is one entry in
 * a list swept a few times a second (deadlines.ts). A session that ends meanwhile is not missed:
 * the hold, when it comes, ends at once for a session ended in the last minute
 * (session/held.ts, events.recentEnd).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Metrics } from '../observability/metrics.js';
import type { SignedInAt } from '../session/data.js';
import type { HeldSessions } from '../session/held.js';
import { GatewayError } from '../errors.js';
import { createDeadlines } from './deadlines.js';
import { userDigest } from '../session/user-index.js';

const LONG_DOWNLOAD_BYTES = 1024 * 1024;
/** How long an open-ended answer runs before it is held with its session. */
export const HOLD_AFTER_MS = 250;

const mayBeEventStream = (c: number) => c === 116 || c === 84 || c === 32 || c === 9;

/**
 * What a proxied response (its head) is: an event stream, an open-ended body (no
 * Content-Length, or a long download), or undefined for an ordinary answer.
 */
export function longLivedKind(proxyRes: Pick<IncomingMessage, 'headers' | 'statusCode'>, method: string | undefined): 'event-stream' | 'open-ended' | undefined {
  const status = proxyRes.statusCode ?? 200;
  if (method === 'HEAD' || status === 204 || status === 304 || status < 200) return undefined;
  const type = proxyRes.headers['content-type'];
  // The pattern is tried only on a type that may start with it ("t", "T" or white space).
  if (type !== undefined && mayBeEventStream(type.charCodeAt(0)) && /^\s*text\/event-stream\b/i.test(type)) return 'event-stream';
  const length = proxyRes.headers['content-length'];
  if (length === undefined) return 'open-ended';
  return Number(length) >= LONG_DOWNLOAD_BYTES ? 'open-ended' : undefined;
}

/** The session a proxied call ran for, noted on the request for its response head. */
export interface StreamOwner {
  digest: string;
  /** Its sign-in, for the absolute timeout (held.ts). */
  auth: SignedInAt | undefined;
  /**
   * The answer's head may come later than a session's end is remembered (a route whose
   * `timeoutSeconds` nears or passes events.RECENT_END_MS: a long poll): the session is checked as the
   * hold begins. A stream whose head came over a minute after a logout streamed on for the
   * whole idle timeout.
   */
  verify?: boolean;
}

export interface StreamTrackerDeps {
  held: HeldSessions;
  metrics: Metrics;
  clock: () => number;
}

/** Holds `owner`'s session while `res` is open, and cuts `res` when the session ends. */
export function trackStream(deps: StreamTrackerDeps, owner: StreamOwner, res: ServerResponse, route: string): void {
  if (res.destroyed) return;
  deps.metrics.openProxiedStreams.inc({ route });
  const release = deps.held.hold(
    owner.digest,
    owner.auth,
    ({ endedAt }) => {
      // No clean end: a cut is the only honest signal that the rest will not come.
      res.destroy();
      deps.metrics.sessionEndToClose.observe({ stream: 'proxied_stream' }, Math.max(0, deps.clock() - endedAt) / 1000);
    },
    owner.verify,
  );
  res.once('close', () => {
    release();
    deps.metrics.openProxiedStreams.dec({ route });
  });
}

export interface LongLivedAnswers {
  /** Told of each long-lived answer as its head is passed on. */
  started(res: ServerResponse, kind: 'event-stream' | 'open-ended'): void;
  close(): void;
}

/**
 * One route's long-lived answers: `hold(res)` holds the session of the call `res` answers (the
 * caller knows it from the request), now for an event stream, after HOLD_AFTER_MS for an
 * open-ended body still open by then.
 */
export function createLongLivedAnswers(hold: (res: ServerResponse) => void, holdAfterMs = HOLD_AFTER_MS): LongLivedAnswers {
  const pending = createDeadlines<ServerResponse>({
    timeoutMs: holdAfterMs,
    expire: hold,
    isSettled: (res) => res.writableFinished || res.destroyed,
  });
  // One listener function for every answer (no closure per call): `this` is the response.
  function ended(this: ServerResponse) {
    pending.done(this);
  }
  return {
    started(res, kind) {
      if (kind === 'event-stream') return hold(res);
      pending.track(res);
      res.on('close', ended);
    },
    close: () => pending.close(),
  };
}

/**
 * Event streams and WebSockets one session may hold open through this process, over all routes,
 * together. Each holds an upstream connection for as long as it runs: without a bound, one
 * session (a script, not a browser: HTTP/1.1 browsers open 6 connections per host) held a
 * route's every connection, and every other user's calls on it waited, then got 504; WebSockets
 * ran the process out of file descriptors.
 */
export const MAX_STREAMS_PER_SESSION = 32;
/**
 * The same, for one user over all their sessions: a user may hold any number of sessions (signed
 * in again and again), and 16 of one account's took a route's every WebSocket (512).
 */
export const MAX_STREAMS_PER_USER = 4 * MAX_STREAMS_PER_SESSION;

/** What is counted while it is open: an answer being streamed, or an upgraded socket. */
export interface Closable {
  once(event: 'close', listener: () => void): unknown;
}

/** Whose a stream is: its session, and the user it signs in (none for a session without one). */
export interface StreamHolder {
  digest: string;
  auth?: { iss: string; sub: string } | undefined;
}

export interface StreamLimit {
  /** Counts `stream` as its session's and its user's until it closes; 429 when either holds its max already. */
  admit(holder: StreamHolder, stream: Closable): GatewayError | undefined;
}

/** What is open per key (a session, a route), each counted until it closes. */
export interface OpenCount {
  /** Counts `stream` under `key` until it closes; false (nothing counted) when `max` are open. */
  admit(key: string, stream: Closable, max: number): boolean;
}

export function createOpenCount(): OpenCount {
  const open = new Map<string, number>();
  return {
    admit(key, stream, max) {
      const count = open.get(key) ?? 0;
      if (count >= max) return false;
      open.set(key, count + 1);
      stream.once('close', () => {
        const left = (open.get(key) ?? 1) - 1;
        if (left > 0) open.set(key, left);
        else open.delete(key);
      });
      return true;
    },
  };
}

/**
 * SPEC §6: a 429 says when to try again. A held stream frees its place when it closes, which a
 * client cannot know: half a minute, as /auth/events says (found by the contract audit).
 */
export const STREAM_RETRY_AFTER = { 'Retry-After': '30' };

export function createStreamLimit(max = MAX_STREAMS_PER_SESSION, maxPerUser = MAX_STREAMS_PER_USER): StreamLimit {
  const perSession = createOpenCount();
  const perUser = createOpenCount();
  return {
    admit({ digest, auth }, stream) {
      if (!perSession.admit(digest, stream, max)) {
        return new GatewayError('rate_limited', { description: 'Too many open streams for this session; close one and try again.', headers: STREAM_RETRY_AFTER });
      }
      // A refused stream closes: what the session counted for it goes with it.
      if (auth !== undefined && !perUser.admit(userDigest(auth.iss, auth.sub), stream, maxPerUser)) {
        return new GatewayError('rate_limited', { description: 'Too many open streams for this user; close one and try again.', headers: STREAM_RETRY_AFTER });
      }
      return undefined;
    },
  };
}
