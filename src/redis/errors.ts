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
 * A command that ran out of `redis.commandTimeoutMs` (deadlines.ts, or ioredis's own on Cluster,
 * both with this message): unlike one refused or never sent, it may still run.
 */
export function timedOut(err: unknown): boolean {
  return err instanceof Error && err.message === 'Command timed out';
}

/** Runs a Redis operation, turning its failure into session_store_unavailable. */
export async function withStore<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    throw storeUnavailable(err);
  }
}
