/**
 * The sessions this instance holds something open for (a proxied WebSocket, a proxied stream,
 * a GET /auth/events stream), and how each learns that its session ended, without polling
 * Redis per socket (issue 16):
 *
 * - Ended elsewhere or here (logout, back-channel logout, DELETE /auth/sessions, a refused
 *   refresh): the session-event bus (events.ts) says so; one subscription per session held.
 * - Absolute timeout: known locally from the session's createdAt; a timer per session held.
 * - Idle timeout: no instance sees it happen (Redis lets the key expire). Each session held
 *   gets a local deadline, "its idle TTL from the last time this instance saw it" (a
 *   tokens-refreshed event from any instance counts as seeing it: a refresh runs inside a
 *   call that has just slid the TTL). At that
 *   deadline, and only then, one command (PTTL of that one key) says whether it is gone
 *   (ended: expired) or how long it still has (activity elsewhere slid it: the deadline moves
 *   there). So 10,000 idle sockets on sessions with a 30-minute idle timeout cost each
 *   session one command per 30 minutes, and nothing per socket.
 * - Redis lost and back (the bus reconnected): the sessions held are checked once, EXISTS in
 *   pipelined batches, and the gone ones end (their end events may have been missed). A pass
 *   that fails (the bus is often back before the command connection) is tried again soon.
 *
 * A Redis error never ends anything: the check is tried again later.
 */
import { MAX_TIMER_MS } from '../clock.js';
import { sessionEndsAt, type SignedInAt } from './data.js';
import type { EndReason, SessionEvents } from './events.js';

export interface HeldEnd {
  reason: EndReason;
  /** When the session ended (ms), as well as this instance knows: for the end-to-close histogram. */
  endedAt: number;
}

export type OnEnd = (end: HeldEnd) => void;

export interface HeldSessions {
  /**
   * Holds `sessionDigest` open until `release()`; `onEnd` runs once if the session ends first
   * (then the hold is released). `auth` is the session's sign-in (its createdAt and endsAt),
   * for the absolute timeout. With `verify`, the session was read longer ago than its end would be
   * remembered (events.recentEnd: a minute): its existence is checked now (one PTTL), not at
   * its idle deadline (half an hour by default).
   */
  hold(sessionDigest: string, auth: SignedInAt | undefined, onEnd: OnEnd, verify?: boolean): () => void;
  /** The session digests held now. */
  digests(): string[];
  /** Checks every session held, once, in batches; ends the ones that are gone. */
  recheck(): Promise<void>;
  close(): void;
}

export interface HeldSessionsOptions {
  events: SessionEvents;
  idleTimeoutSeconds: number;
  absoluteTimeoutSeconds: number;
  /** A session's remaining idle lifetime in ms, undefined when it is gone (one PTTL). */
  remainingMs: (sessionDigest: string) => Promise<number | undefined>;
  /** Whether each session still exists, in order (pipelined batches). */
  exist: (sessionDigests: readonly string[]) => Promise<boolean[]>;
  clock?: () => number;
  /** After a failed check, when to try again (ms; default 5 s), doubling for a session's idle check up to its idle timeout. */
  retryMs?: number;
  /** Told of the first failed check after a good one: a Redis outage is one report, not one per held session and retry. */
  onCheckFailed?: (err: unknown) => void;
}

/** Past the TTL's end: the key is surely gone when the check runs. */
const EXPIRY_MARGIN_MS = 250;
/** The first retry of a failed recheck after the bus came back. */
const RECHECK_FIRST_RETRY_MS = 250;
/**
 * How often held sessions are swept for an absolute end the clock has passed. Their timers run
 * on monotonic time: after a forward step of the wall clock (NTP correcting a slow clock, a VM
 * resumed), a session past its end answered 401 while its streams and tunnels stayed open for
 * the length of the step (found by red team).
 */
const SWEEP_MS = 5000;

interface Entry {
  holders: Set<OnEnd>;
  /** Epoch ms of the session's absolute end; undefined for one that signs no one in. */
  endsAt: number | undefined;
  idleTimer?: NodeJS.Timeout;
  absoluteTimer?: NodeJS.Timeout;
  unsubscribe: () => void;
  /** Idle checks failed in a row (the next one backs off). */
  failedChecks: number;
}

export function createHeldSessions(options: HeldSessionsOptions): HeldSessions {
  const { events } = options;
  const clock = options.clock ?? Date.now;
  const retryMs = options.retryMs ?? 5000;
  const entries = new Map<string, Entry>();
  let sweeper: NodeJS.Timeout | undefined;
  function sweep(): void {
    const now = clock();
    for (const [sessionDigest, entry] of [...entries]) {
      if (entry.endsAt !== undefined && entry.endsAt <= now) end(sessionDigest, entry, 'expired', entry.endsAt);
    }
    if (entries.size === 0) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  }

  function end(sessionDigest: string, entry: Entry, reason: EndReason, endedAt: number): void {
    if (entries.get(sessionDigest) !== entry) return;
    drop(sessionDigest, entry);
    for (const onEnd of entry.holders) onEnd({ reason, endedAt });
  }

  function drop(sessionDigest: string, entry: Entry): void {
    clearTimeout(entry.idleTimer);
    clearTimeout(entry.absoluteTimer);
    entry.unsubscribe();
    entries.delete(sessionDigest);
  }

  function armIdle(sessionDigest: string, entry: Entry, delayMs: number): void {
    clearTimeout(entry.idleTimer);
    entry.idleTimer = setTimeout(() => void checkIdle(sessionDigest, entry), Math.min(Math.max(delayMs, 0), MAX_TIMER_MS));
    entry.idleTimer.unref();
  }

  // Whether the last check failed: only the first failure of a run is reported.
  let checksFailing = false;
  function checkFailed(err: unknown): void {
    if (checksFailing) return;
    checksFailing = true;
    options.onCheckFailed?.(err);
  }

  async function checkIdle(sessionDigest: string, entry: Entry): Promise<void> {
    let remaining: number | undefined;
    try {
      remaining = await options.remainingMs(sessionDigest);
    } catch (err) {
      checkFailed(err);
      if (entries.get(sessionDigest) !== entry) return;
      entry.failedChecks += 1;
      // Backing off: 10,000 held sessions would otherwise read Redis 2,000 times a second through an outage.
      armIdle(sessionDigest, entry, Math.min(retryMs * 2 ** (entry.failedChecks - 1), options.idleTimeoutSeconds * 1000));
      return;
    }
    checksFailing = false;
    if (entries.get(sessionDigest) !== entry) return;
    entry.failedChecks = 0;
    if (remaining === undefined) {
      // Every instance holding it learns it at its own deadline; telling them now is cheaper
      // than leaving them to find out.
      events.publish(sessionDigest, { type: 'signed-out', reason: 'expired' });
      end(sessionDigest, entry, 'expired', clock());
    } else {
      armIdle(sessionDigest, entry, remaining + EXPIRY_MARGIN_MS);
    }
  }

  function armAbsolute(sessionDigest: string, entry: Entry): void {
    const { endsAt } = entry;
    if (endsAt === undefined) return;
    const delay = endsAt - clock();
    entry.absoluteTimer = setTimeout(() => {
      if (clock() < endsAt) armAbsolute(sessionDigest, entry);
      else end(sessionDigest, entry, 'expired', endsAt);
    }, Math.min(Math.max(delay, 0), MAX_TIMER_MS));
    entry.absoluteTimer.unref();
  }

  let recheckRetry: NodeJS.Timeout | undefined;
  /**
   * One pass over every session held. The bus often reconnects before the command connection
   * does: a pass that fails is tried again soon (backing off up to retryMs) until one succeeds,
   * or a session that ended while Redis was away would stay open until its idle deadline.
   */
  async function recheckOnce(nextRetryMs: number): Promise<void> {
    const digests = [...entries.keys()];
    if (digests.length === 0) return;
    let alive: boolean[];
    try {
      alive = await options.exist(digests);
    } catch (err) {
      checkFailed(err);
      recheckRetry = setTimeout(() => {
        recheckRetry = undefined;
        void recheckOnce(Math.min(nextRetryMs * 2, retryMs));
      }, nextRetryMs);
      recheckRetry.unref();
      return;
    }
    // A good read ends the run of failures, whichever kind of check made it: sessions that
    // keep refreshing never run an idle check, and the next outage must be reported too.
    checksFailing = false;
    const now = clock();
    digests.forEach((sessionDigest, i) => {
      const entry = entries.get(sessionDigest);
      if (entry && alive[i] === false) end(sessionDigest, entry, 'revoked', now);
    });
  }

  return {
    hold(sessionDigest, auth, onEnd, verify = false) {
      let entry = entries.get(sessionDigest);
      if (!entry) {
        const created: Entry = {
          holders: new Set(),
          endsAt: auth && sessionEndsAt(auth, options.absoluteTimeoutSeconds),
          failedChecks: 0,
          unsubscribe: events.subscribe(sessionDigest, (event, delivery) => {
            if (event.type === 'signed-out') end(sessionDigest, created, event.reason, delivery.publishedAt);
            // A refresh runs inside a call that has just slid the idle TTL: activity, no read needed.
            else if (event.type === 'tokens-refreshed') armIdle(sessionDigest, created, options.idleTimeoutSeconds * 1000 + EXPIRY_MARGIN_MS);
          }),
        };
        entry = created;
        entries.set(sessionDigest, entry);
        // Runs only while something is held (it stops itself once nothing is).
        if (sweeper === undefined) {
          sweeper = setInterval(sweep, SWEEP_MS);
          sweeper.unref();
        }
        // The session was just read (its idle TTL slid to the full timeout).
        armIdle(sessionDigest, entry, options.idleTimeoutSeconds * 1000 + EXPIRY_MARGIN_MS);
        armAbsolute(sessionDigest, entry);
      }
      const held = entry;
      // A wrapper per hold: the same callback held twice is two holds.
      const holder: OnEnd = (e) => onEnd(e);
      held.holders.add(holder);
      // Its read may have raced the end event (heard before this hold): end it now, once the
      // caller has finished setting up.
      const ended = events.recentEnd(sessionDigest);
      if (ended) setImmediate(() => end(sessionDigest, held, ended.reason, ended.publishedAt));
      else if (verify) void checkIdle(sessionDigest, held);
      return () => {
        if (!held.holders.delete(holder)) return;
        if (held.holders.size === 0 && entries.get(sessionDigest) === held) drop(sessionDigest, held);
      };
    },
    digests() {
      return [...entries.keys()];
    },
    async recheck() {
      // A later recheck (another reconnect) supersedes a retry still waiting.
      clearTimeout(recheckRetry);
      recheckRetry = undefined;
      await recheckOnce(RECHECK_FIRST_RETRY_MS);
    },
    close() {
      clearTimeout(recheckRetry);
      recheckRetry = undefined;
      clearInterval(sweeper);
      sweeper = undefined;
      for (const [sessionDigest, entry] of [...entries]) drop(sessionDigest, entry);
    },
  };
}
