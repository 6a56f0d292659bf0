/**
 * Proxied responses that may stay open for long, and closing them when their session ends
 * (issue 16). Which responses: an event stream (`text/event-stream`), a body without
 * `Content-Length` (chunked or close-delimited: NDJSON, long polls, downloads of unknown size),
 * or one of 1 MiB or more (a long download). Everything else is an ordinary call that ends on
 * its own within moments: tracking it would put timers and a subscription on the hot path for
 * nothing. Deciding on the response head costs no Redis command and no timer per call.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Metrics } from '../observability/metrics.js';
import type { HeldSessions } from '../session/held.js';

const LONG_DOWNLOAD_BYTES = 1024 * 1024;

const mayBeEventStream = (c: number) => c === 116 || c === 84 || c === 32 || c === 9;

/** Whether a proxied response (its head) may stay open for long. */
export function isLongLived(proxyRes: Pick<IncomingMessage, 'headers' | 'statusCode'>, method: string | undefined): boolean {
  const status = proxyRes.statusCode ?? 200;
  if (method === 'HEAD' || status === 204 || status === 304 || status < 200) return false;
  const type = proxyRes.headers['content-type'];
  // The pattern is tried only on a type that may start with it ("t", "T" or white space).
  if (type !== undefined && mayBeEventStream(type.charCodeAt(0)) && /^\s*text\/event-stream\b/i.test(type)) return true;
  const length = proxyRes.headers['content-length'];
  if (length === undefined) return true;
  return Number(length) >= LONG_DOWNLOAD_BYTES;
}

/** The session a proxied call ran for, noted on the request for its response head. */
export interface StreamOwner {
  digest: string;
  createdAt: number | undefined;
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
  const release = deps.held.hold(owner.digest, owner.createdAt, ({ endedAt }) => {
    // No clean end: a cut is the only honest signal that the rest will not come.
    res.destroy();
    deps.metrics.sessionEndToClose.observe({ stream: 'proxied_stream' }, Math.max(0, deps.clock() - endedAt) / 1000);
  });
  res.once('close', () => {
    release();
    deps.metrics.openProxiedStreams.dec({ route });
  });
}
