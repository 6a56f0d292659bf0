/**
 * The latest DPoP-Nonce (RFC 9449 §8, §9) of each server the gateway sends proofs to (the
 * provider's token endpoint, DPoP upstreams), shared by every instance through Redis, so that one
 * instance's `use_dpop_nonce` round trip teaches all of them (a replica-local cache makes every
 * replica pay it, and pay it again whenever the server rotates its nonce).
 *
 * Cost: a nonce known in this process costs nothing. An origin this process has not looked up
 * costs one GET, then is remembered (a miss too, for `recheckMs`), so the steady state of a DPoP
 * route adds no Redis command. A nonce learnt from a server is written (SET EX) only when it
 * changed, and at most once per `writeIntervalMs` per origin: a server that sends a new nonce
 * with every answer must not add a Redis write to every call (another instance holding a nonce
 * a second old pays at most one use_dpop_nonce retry). A Redis failure here never fails a call: the proof goes without the shared nonce and
 * the server's use_dpop_nonce answer (one retry) makes up for it.
 *
 * Nonces are public values (servers send them in clear), so they are stored as they are. The
 * "origin" a nonce is kept under names the server: the provider's token endpoint origin, or
 * `upstream <origin>` for a DPoP upstream (proxy/dpop-proofs.ts), so that an upstream sharing
 * the provider's origin never touches the provider's nonce. Values are checked (parseNonce,
 * crypto/dpop.ts: 1 to 1024 NQCHAR) before they get here.
 */
import type { RedisClient } from './client.js';
import { digest, type Keys } from './keys.js';

/** Servers rotate nonces within minutes; a stored one older than this is not worth a retry. */
export const NONCE_TTL_SECONDS = 300;
const DEFAULT_RECHECK_MS = 30_000;
const MAX_ORIGINS = 1000;

export interface DpopNonces {
  /** The origin's latest nonce: from memory, else (once per recheck interval) from Redis. */
  get(origin: string): Promise<string | undefined>;
  /** Remembers a nonce the server sent, here and (when it changed) in Redis for the others. */
  put(origin: string, nonce: string): void;
}

export interface DpopNoncesOptions {
  redis: RedisClient;
  keys: Keys;
  clock?: () => number;
  /** How long a Redis miss is remembered before Redis is asked again (default 30 s). */
  recheckMs?: number;
  /** Least time between two Redis writes for one origin (default 1 s). */
  writeIntervalMs?: number;
  /** Told about Redis failures (they are otherwise ignored, see above). */
  onError?: (err: unknown) => void;
}

interface Entry {
  nonce: string | undefined;
  /** For misses: when Redis was last asked. */
  checkedAt: number;
  /** When this process last wrote the origin's nonce to Redis. */
  writtenAt?: number;
}

export function createDpopNonces(options: DpopNoncesOptions): DpopNonces {
  const { redis, keys } = options;
  const clock = options.clock ?? Date.now;
  const recheckMs = options.recheckMs ?? DEFAULT_RECHECK_MS;
  const writeIntervalMs = options.writeIntervalMs ?? 1000;
  const known = new Map<string, Entry>();
  const pending = new Map<string, Promise<string | undefined>>();

  function remember(origin: string, entry: Entry): void {
    if (!known.has(origin) && known.size >= MAX_ORIGINS) known.delete(known.keys().next().value as string);
    known.set(origin, entry);
  }

  async function lookup(origin: string): Promise<string | undefined> {
    let nonce: string | undefined;
    try {
      nonce = (await redis.get(keys.dpopNonce(digest(origin)))) ?? undefined;
    } catch (err) {
      options.onError?.(err);
    }
    // A nonce put meanwhile (from a server's answer) is newer than what Redis said.
    const current = known.get(origin);
    if (current?.nonce !== undefined) return current.nonce;
    remember(origin, { nonce, checkedAt: clock() });
    return nonce;
  }

  return {
    get(origin) {
      const entry = known.get(origin);
      if (entry && (entry.nonce !== undefined || clock() - entry.checkedAt < recheckMs)) return Promise.resolve(entry.nonce);
      let lookingUp = pending.get(origin);
      if (!lookingUp) {
        lookingUp = lookup(origin).finally(() => pending.delete(origin));
        pending.set(origin, lookingUp);
      }
      return lookingUp;
    },
    put(origin, nonce) {
      const entry = known.get(origin);
      if (entry?.nonce === nonce) return;
      const now = clock();
      const lastWrite = entry?.writtenAt;
      const write = lastWrite === undefined || now - lastWrite >= writeIntervalMs;
      remember(origin, { nonce, checkedAt: now, ...(write ? { writtenAt: now } : lastWrite !== undefined ? { writtenAt: lastWrite } : {}) });
      if (!write) return;
      redis.set(keys.dpopNonce(digest(origin)), nonce, 'EX', NONCE_TTL_SECONDS).catch((err: unknown) => options.onError?.(err));
    },
  };
}
