/**
 * The session-event bus (issue 16): the instance that learns that a session ended or changed
 * publishes one event; every instance receives it once (one subscription per process) and fans
 * it out to its own listeners of that session.
 *
 * Events are keyed by the session digest (redis/keys.ts: a SHA-256 of the session ID, the name
 * the session's Redis key already carries), never by the cookie value, and carry no token or
 * claim: a reason, or the step-up parameters the SPA needs to sign in again. Listeners of the
 * publishing instance are told at once, before Redis is asked, so a logout closes this
 * instance's streams even while Redis is away; its own echo from Redis is ignored (origin id).
 *
 * What arrives from Redis is parsed like any other input from outside: a malformed or unknown
 * message is dropped and counted, never thrown.
 */
import { acrList, MAX_AGE_LIMIT_SECONDS } from '../config/auth-params.js';
import { randomBytes } from 'node:crypto';
import type { BusTransport } from '../redis/pubsub.js';

/**
 * `replaced`: a new sign-in of the same browser (a second login in another tab, a step-up)
 * ended this session; the browser already holds the new session's cookie, so the SPA reconnects
 * instead of telling the user they were signed out.
 */
export const END_REASONS = ['logout', 'provider-logout', 'revoked', 'expired', 'replaced'] as const;
export type EndReason = (typeof END_REASONS)[number];

export type SessionEvent =
  | { type: 'signed-out'; reason: EndReason }
  | { type: 'step-up-required'; acr_values?: string; max_age?: number; loginUrl: string }
  | { type: 'tokens-refreshed' };

export type EventKind = SessionEvent['type'];

/** What a listener learns besides the event: when it was published (ms, the publisher's clock). */
export interface Delivery {
  publishedAt: number;
}

export type Listener = (event: SessionEvent, delivery: Delivery) => void;

export interface SessionEvents {
  /** Tells this instance's listeners now, and every other instance through Redis (best effort). */
  publish(sessionDigest: string, event: SessionEvent): void;
  /** Listens to one session's events; returns the function that stops listening. */
  subscribe(sessionDigest: string, listener: Listener): () => void;
  /**
   * The end of a session heard in the last minute, if any: for a stream opened just as its
   * session ended (its read raced the end event), which would otherwise miss it.
   */
  recentEnd(sessionDigest: string): { reason: EndReason; publishedAt: number } | undefined;
  /** Runs after the bus's connection came back from a loss (events may have been missed). */
  onReconnect(listener: () => void): void;
  close(): Promise<void>;
}

export interface SessionEventsOptions {
  /** Undefined: this process only (the demo's in-memory store, which nothing else shares). */
  transport?: BusTransport;
  clock?: () => number;
  onPublished?: (kind: EventKind) => void;
  onReceived?: (kind: EventKind) => void;
  /** A message from Redis that is not one of ours (dropped). */
  onMalformed?: () => void;
  onPublishFailed?: (err: unknown) => void;
}

const DIGEST = /^[A-Za-z0-9_-]{32}$/;
/** How long a session's end is remembered (recentEnd): a read older than this may have missed it. */
export const RECENT_END_MS = 60_000;
const RECENT_END_MAX = 10_000;
/**
 * A signed-out event Redis did not take (the publish failed: this instance lost its link) is
 * offered again this often, for as long as an end is remembered, until Redis takes it: the
 * other instances' streams of that session stayed open until their idle deadline otherwise.
 */
const RESEND_EVERY_MS = 1_000;

/** A same-origin relative path (the gateway's own login URL), never `//host` or `/\host`. */
function isLocalPath(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 16384 && /^\/(?![/\\])[\x21-\x7e]*$/.test(value);
}

/** Parses one event as it crossed a boundary (Redis, or a caller's object); undefined if malformed. */
export function parseEvent(value: unknown): SessionEvent | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const e = value as Record<string, unknown>;
  switch (e.type) {
    case 'signed-out':
      return (END_REASONS as readonly unknown[]).includes(e.reason) ? { type: 'signed-out', reason: e.reason as EndReason } : undefined;
    case 'tokens-refreshed':
      return { type: 'tokens-refreshed' };
    case 'step-up-required': {
      if (!isLocalPath(e.loginUrl)) return undefined;
      // The rules the gateway wrote them by (config/auth-params.ts): nothing it would not produce.
      if (e.acr_values !== undefined && (typeof e.acr_values !== 'string' || acrList(e.acr_values) === undefined)) return undefined;
      if (e.max_age !== undefined && (!Number.isSafeInteger(e.max_age) || (e.max_age as number) < 0 || (e.max_age as number) > MAX_AGE_LIMIT_SECONDS)) return undefined;
      return {
        type: 'step-up-required',
        loginUrl: e.loginUrl,
        ...(e.acr_values !== undefined ? { acr_values: e.acr_values as string } : {}),
        ...(e.max_age !== undefined ? { max_age: e.max_age as number } : {}),
      };
    }
    default:
      return undefined;
  }
}

interface Wire {
  /** Origin: the publishing process (its own echo is skipped). */
  o: string;
  d: string;
  t: number;
  e: SessionEvent;
}

function parseWire(message: string): Wire | undefined {
  if (message.length > 32768) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(message);
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null) return undefined;
  const w = raw as Record<string, unknown>;
  if (typeof w.o !== 'string' || typeof w.d !== 'string' || !DIGEST.test(w.d) || typeof w.t !== 'number' || !Number.isFinite(w.t)) return undefined;
  const event = parseEvent(w.e);
  return event ? { o: w.o, d: w.d, t: w.t, e: event } : undefined;
}

export function createSessionEvents(options: SessionEventsOptions = {}): SessionEvents {
  const clock = options.clock ?? Date.now;
  const origin = randomBytes(12).toString('base64url');
  const listeners = new Map<string, Set<Listener>>();
  const reconnectListeners: Array<() => void> = [];

  // Ends to publish again, oldest first, by session (the latest wins), bounded in time and size.
  const unsent = new Map<string, { message: string; until: number }>();
  let resendTimer: NodeJS.Timeout | undefined;
  let resending = false;
  let closed = false;
  function resendLater(sessionDigest: string, message: string): void {
    // A publish that fails after close() (in flight at shutdown) has no transport left to retry on.
    if (closed) return;
    unsent.delete(sessionDigest);
    if (unsent.size >= RECENT_END_MAX) unsent.delete(unsent.keys().next().value as string);
    unsent.set(sessionDigest, { message, until: clock() + RECENT_END_MS });
    resendTimer ??= setInterval(() => void resend(), RESEND_EVERY_MS).unref();
  }
  async function resend(): Promise<void> {
    if (resending || !options.transport) return;
    resending = true;
    try {
      for (const [sessionDigest, entry] of unsent) {
        if (entry.until > clock()) await options.transport.publish(entry.message);
        unsent.delete(sessionDigest);
      }
    } catch {
      // Still away: the next tick tries again.
    } finally {
      resending = false;
      if (unsent.size === 0 && resendTimer) {
        clearInterval(resendTimer);
        resendTimer = undefined;
      }
    }
  }

  // Ends heard recently, oldest first (Map order), bounded in time and size.
  const recentEnds = new Map<string, { reason: EndReason; publishedAt: number; heardAt: number }>();
  function remember(sessionDigest: string, reason: EndReason, publishedAt: number): void {
    const now = clock();
    for (const [d, e] of recentEnds) {
      if (e.heardAt > now - RECENT_END_MS && recentEnds.size < RECENT_END_MAX) break;
      recentEnds.delete(d);
    }
    recentEnds.delete(sessionDigest);
    recentEnds.set(sessionDigest, { reason, publishedAt, heardAt: now });
  }

  function deliver(sessionDigest: string, event: SessionEvent, delivery: Delivery): void {
    if (event.type === 'signed-out') remember(sessionDigest, event.reason, delivery.publishedAt);
    const set = listeners.get(sessionDigest);
    if (!set) return;
    // A copy: a listener usually unsubscribes itself (a closed stream).
    for (const listener of [...set]) listener(event, delivery);
  }

  options.transport?.listen(
    (message) => {
      const wire = parseWire(message);
      if (!wire) {
        options.onMalformed?.();
        return;
      }
      if (wire.o === origin) return;
      options.onReceived?.(wire.e.type);
      deliver(wire.d, wire.e, { publishedAt: wire.t });
    },
    () => {
      for (const listener of reconnectListeners) listener();
    },
  );

  return {
    publish(sessionDigest, given) {
      // The same rules as for what arrives from Redis, so that every instance hears the same.
      const event = parseEvent(given);
      if (!event || !DIGEST.test(sessionDigest)) {
        options.onMalformed?.();
        return;
      }
      const publishedAt = clock();
      options.onPublished?.(event.type);
      deliver(sessionDigest, event, { publishedAt });
      if (!options.transport) return;
      const message = JSON.stringify({ o: origin, d: sessionDigest, t: publishedAt, e: event } satisfies Wire);
      options.transport.publish(message).catch((err: unknown) => {
        options.onPublishFailed?.(err);
        if (event.type === 'signed-out') resendLater(sessionDigest, message);
      });
    },
    subscribe(sessionDigest, listener) {
      let set = listeners.get(sessionDigest);
      if (!set) listeners.set(sessionDigest, (set = new Set()));
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0 && listeners.get(sessionDigest) === set) listeners.delete(sessionDigest);
      };
    },
    recentEnd(sessionDigest) {
      const e = recentEnds.get(sessionDigest);
      return e && e.heardAt > clock() - RECENT_END_MS ? { reason: e.reason, publishedAt: e.publishedAt } : undefined;
    },
    onReconnect(listener) {
      reconnectListeners.push(listener);
    },
    async close() {
      closed = true;
      if (resendTimer) clearInterval(resendTimer);
      resendTimer = undefined;
      unsent.clear();
      listeners.clear();
      recentEnds.clear();
      await options.transport?.close();
    },
  };
}
