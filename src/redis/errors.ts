import { GatewayError } from '../errors.js';

/**
 * Any failure talking to Redis (timeout, connection refused, offline queue disabled, cluster
 * down) becomes 503 session_store_unavailable. It never ends a session: the caller rethrows,
 * and the cookie stays untouched for when Redis is back.
 */
export function storeUnavailable(cause: unknown): GatewayError {
  return cause instanceof GatewayError ? cause : new GatewayError('session_store_unavailable', { cause });
}

/**
 * Whether a failed command may still have run: it timed out (deadlines.ts, or ioredis's own on
 * Cluster), or its connection dropped with it sent (MaxRetriesPerRequestError). Not when Redis
 * answered with an error (a ReplyError: a script that failed stops there; ACL, OOM), nor when
 * every node it was sent to redirected it, nor when it was never sent (the offline queue is off: Redis away, or the connection already closed).
 */
export function mayHaveRun(err: unknown): boolean {
  if (!(err instanceof Error) || err.name === 'ReplyError') return false;
  // Redirected (MOVED, ASK, TRYAGAIN) until ioredis gave up: every node refused it, none ran it.
  if (err.message.startsWith('Too many Cluster redirections')) return false;
  return !/enableOfflineQueue|Connection is closed/.test(err.message);
}

/** Runs a Redis operation, turning its failure into session_store_unavailable. */
export async function withStore<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    throw storeUnavailable(err);
  }
}
