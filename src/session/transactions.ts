/**
 * Login transactions (state, nonce, PKCE verifier, returnTo), kept in Redis by a digest of
 * `state`, sealed (the verifier and nonce are secrets), short-lived, and taken exactly once
 * (compare-and-delete), so a replayed callback finds nothing.
 */
import type { DpopPrivateJwk } from '../crypto/dpop.js';
import type { Sealer } from '../crypto/seal.js';
import type { RedisClient } from '../redis/client.js';
import { digest, type Keys } from '../redis/keys.js';
import { createTimed, type RedisObserver } from '../redis/timing.js';

export interface LoginTransaction {
  state: string;
  nonce: string;
  codeVerifier: string;
  returnTo: string;
  /** Digest of the login cookie's value: binds the transaction to the browser that started it. */
  binding: string;
  createdAt: number;
  /**
   * Digest of the session this browser had when it started the login (its cookie is sent to
   * /auth/login, a same-site navigation), ended once the sign-in succeeds: the callback is a
   * cross-site navigation, on which a SameSite=Strict session cookie is not sent.
   */
  previousSession?: string;
  /**
   * The user (user-index.ts userDigest) whose session previousSession was, read at /auth/login
   * while it still was one: at the callback it may be gone (the provider's back-channel logout
   * as the next user signs in there), and a sign-in of someone else then clears what the
   * browser kept.
   */
  previousUser?: string;
  /**
   * What the login asked of the authentication (acr_values, max_age), which the callback checks
   * the ID token against (OIDC Core §3.1.3.7). Sealed with the rest.
   */
  asked?: { acrValues?: string[]; maxAge?: number };
  /** RFC 9449: the key whose thumbprint went out as `dpop_jkt`; it becomes the session's. */
  dpopKey?: DpopPrivateJwk;
}

/** How full the set of login transactions is: for the global cap on logins in progress. */
export interface TransactionLoad {
  active: number;
  /** Seconds until the oldest transaction expires (when a slot frees at the latest); at least 1. */
  retryAfterSeconds: number;
}

export const TRANSACTION_TTL_SECONDS = 600;

export interface Transactions {
  save(tx: LoginTransaction): Promise<void>;
  /**
   * The transaction of `state`, deleted, when `binding` (the digest of the login cookie) is the
   * one it was saved with; otherwise undefined, and the transaction is left as it was.
   */
  take(state: string, binding: string): Promise<LoginTransaction | undefined>;
  /** Login transactions started (by any instance) that were neither taken nor expired. */
  active(): Promise<number>;
  /** active() and the earliest expiry, in one round trip. */
  load(): Promise<TransactionLoad>;
}

export interface TransactionsOptions {
  clock?: () => number;
  observe?: RedisObserver;
}

const AAD = 'login-transaction';

/** DEL iff the key still holds ARGV[1]: of concurrent callbacks that read it, one takes it. */
const TAKE = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1`;

/**
 * Prunes the expired, lists one more, and keeps the set no longer than its newest member (in one
 * step: without a TTL, the set outlived the last sign-in for good; found by the hygiene red team).
 */
const LIST = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
return redis.call('PEXPIRE', KEYS[1], ARGV[4])`;

/**
 * Besides its own key, each transaction is listed in one sorted set scored by its expiry, so
 * that "how many logins are in progress" is one ZCARD, shared by every instance, with no key
 * scan. Entries past their expiry are pruned whenever a transaction is saved or counted.
 */
export function createTransactions(redis: RedisClient, keys: Keys, sealer: Sealer, options: TransactionsOptions = {}): Transactions {
  const clock = options.clock ?? Date.now;
  const timed = createTimed(options.observe);
  const listed = keys.activeTransactions();
  return {
    async save(tx) {
      const d = digest(tx.state);
      const now = clock();
      await timed('transaction_save', () =>
        Promise.all([
          redis.set(keys.transaction(d), sealer.seal(JSON.stringify(tx), AAD), 'EX', TRANSACTION_TTL_SECONDS),
          redis.eval(LIST, 1, listed, String(now), String(now + TRANSACTION_TTL_SECONDS * 1000), d, String(TRANSACTION_TTL_SECONDS * 1000)),
        ]),
      );
    },
    take(state, binding) {
      const d = digest(state);
      const key = keys.transaction(d);
      return timed('transaction_take', async () => {
        // Read, checked, and only then deleted: a callback from another browser (a `state` is
        // in the provider page's URL) must not spend the pending sign-in of the one that started it.
        const sealed = await redis.get(key);
        if (sealed === null) return undefined;
        const json = sealer.open(sealed, AAD);
        if (json === undefined) return undefined;
        const tx = JSON.parse(json) as LoginTransaction;
        // Defence in depth: the key is a digest, so check the full value too.
        if (tx.state !== state || tx.binding !== binding) return undefined;
        const [taken] = await Promise.all([redis.eval(TAKE, 1, key, sealed), redis.zrem(listed, d)]);
        return taken === 1 ? tx : undefined;
      });
    },
    async active() {
      const [, count] = await timed('transaction_count', () =>
        Promise.all([redis.zremrangebyscore(listed, '-inf', clock()), redis.zcard(listed)]),
      );
      return count;
    },
    async load() {
      const now = clock();
      const [, active, oldest] = await timed('transaction_count', () =>
        Promise.all([redis.zremrangebyscore(listed, '-inf', now), redis.zcard(listed), redis.zrange(listed, 0, 0, 'WITHSCORES')]),
      );
      const expiresAt = Number(oldest[1]);
      const wait = Number.isFinite(expiresAt) ? Math.ceil((expiresAt - now) / 1000) : TRANSACTION_TTL_SECONDS;
      return { active, retryAfterSeconds: Math.min(TRANSACTION_TTL_SECONDS, Math.max(1, wait)) };
    },
  };
}
