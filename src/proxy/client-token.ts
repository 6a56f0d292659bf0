/**
 * Client-credentials tokens for `auth: client` routes, shared by every gateway process.
 *
 * Lookup order: this process's copy → the sealed copy in Redis → the provider. Only one
 * process asks the provider per (scopes, resource) and expiry: a Redis lock elects it, the
 * others poll the cache (bounded), and callers within a process share one promise. A token is
 * renewed `skewSeconds` before it expires, or halfway through its life when it lives less than
 * twice that (session/tokens.ts renewalMargin), so no request carries an expired one.
 *
 * A token an upstream refused (401 invalid_token) is replaced only while it is still the
 * current one, here and in Redis: if another request or instance already replaced it, the
 * newer one is used and nothing is fetched. Otherwise one caller per cooldown interval (all
 * instances) may fetch a new one (refusal-cooldown.ts); the others get undefined and pass the
 * upstream's 401 through. The shared token is never deleted: the new one overwrites it, so no
 * instance is left without a token while the grant is under way.
 *
 * A grant that fails is not repeated on every API call (grant-backoff.ts: 1 s, doubling to 30 s
 * while the failures go on). Meanwhile a token of this process that has not expired is served
 * (it was only due for renewal), a token another process obtained is taken from Redis, and
 * otherwise the call fails at once with the grant's error and Retry-After. Without this, a provider that is down or
 * refuses the gateway's credentials received one grant per API call from anonymous callers.
 */
import type { Sealer } from '../crypto/seal.js';
import { GatewayError } from '../errors.js';
import type { RedisClient } from '../redis/client.js';
import { digest, type Keys } from '../redis/keys.js';
import { sleep, tryLock, type Lock } from '../redis/lock.js';
import { storeUnavailable } from '../redis/errors.js';
import { expiresWithin, hasExpired, lifeOf, renewalMargin, type Expiring } from '../session/tokens.js';
import { createGrantBackoff } from './grant-backoff.js';
import { createRefusalCooldown, type RefusalCooldown } from './refusal-cooldown.js';

export interface ClientTokenRequest {
  scopes: readonly string[];
  resource?: string;
}

export interface FetchedClientToken extends Expiring {
  accessToken: string;
}

export interface ClientTokenOptions {
  redis: RedisClient;
  keys: Keys;
  sealer: Sealer;
  /** Asks the provider (client_credentials grant). */
  fetch: (request: ClientTokenRequest) => Promise<FetchedClientToken>;
  skewSeconds: number;
  clock: () => number;
  maxWaitMs?: number;
  onFetch?: (outcome: 'success' | 'failure') => void;
  /** Bounds replacements of refused tokens; by default the shared Redis cooldown. */
  cooldown?: RefusalCooldown;
}

interface Cached extends Expiring {
  accessToken: string;
  expiresAt: number;
}


export interface ClientTokens {
  /** The current token: this process's copy, the shared one, or a new one. */
  get(request: ClientTokenRequest): Promise<string>;
  /**
   * A token to retry with after an upstream refused `refused`: a newer one, or undefined when
   * the refused token may not be replaced now (pass the upstream's answer through).
   */
  renew(request: ClientTokenRequest, refused: string): Promise<string | undefined>;
}

/** How long a grant's lock lives: longer than the provider may take (its timeout, 10 s). */
const LOCK_TTL_MS = 15_000;
const SHARE_RETRY_MS = 500;

/** attempt()'s answer when another process holds the renewal lock. */
const BUSY = Symbol('busy');

export function createClientTokens(options: ClientTokenOptions): ClientTokens {
  const { redis, keys, sealer, skewSeconds, clock } = options;
  const maxWaitMs = options.maxWaitMs ?? 12_000;
  const cooldown = options.cooldown ?? createRefusalCooldown({ redis, keys });
  const local = new Map<string, Cached>();
  const getting = new Map<string, Promise<string>>();
  const renewing = new Map<string, Promise<string | undefined>>();
  const failing = createGrantBackoff<GatewayError>(clock);
  const nowSeconds = () => Math.floor(clock() / 1000);
  const usable = (c: Cached | undefined): c is Cached => c !== undefined && !expiresWithin(c, skewSeconds, nowSeconds());
  const cacheKey = (request: ClientTokenRequest) => digest(`${[...request.scopes].sort().join(' ')}|${request.resource ?? ''}`);

  async function readShared(key: string): Promise<Cached | undefined> {
    const sealed = await redis.get(keys.clientToken(key));
    const json = sealed === null ? undefined : sealer.open(sealed, `client-token:${key}`);
    if (json === undefined) return undefined;
    const cached = JSON.parse(json) as Cached;
    return usable(cached) ? cached : undefined;
  }

  async function share(key: string, cached: Cached): Promise<void> {
    const ttl = Math.floor(cached.expiresAt - renewalMargin(cached, skewSeconds) - nowSeconds());
    if (ttl > 0) await redis.set(keys.clientToken(key), sealer.seal(JSON.stringify(cached), `client-token:${key}`), 'EX', ttl);
  }

  /**
   * A token the provider issued that Redis did not take (a failover under way): it serves this
   * process at once, and is offered again every SHARE_RETRY_MS for as long as the lock may live,
   * then the lock is let go. Dropped, its caller got a 503 while the token was in hand, and the
   * lock, taken on the new master before the old one hung, held every other process back
   * (up to maxWaitMs per call) until it lapsed.
   */
  function shareLater(key: string, cached: Cached, lock: Lock): void {
    const until = performance.now() + LOCK_TTL_MS;
    const timer = setInterval(() => {
      if (performance.now() > until) return void clearInterval(timer);
      share(key, cached).then(
        () => {
          clearInterval(timer);
          return lock.release();
        },
        () => undefined,
      );
    }, SHARE_RETRY_MS);
    timer.unref();
  }

  async function fetchAndShare(key: string, request: ClientTokenRequest, lock: Lock): Promise<Cached> {
    let fetched: FetchedClientToken;
    try {
      fetched = await options.fetch(request);
      options.onFetch?.('success');
      failing.succeeded(key);
    } catch (err) {
      options.onFetch?.('failure');
      const error = err instanceof GatewayError && err.code !== 'login_required' ? err : new GatewayError('token_refresh_failed', { cause: err });
      throw retryLater(error, failing.failed(key, error));
    }
    const cached: Cached = { accessToken: fetched.accessToken, ...lifeOf(fetched, nowSeconds()) };
    try {
      await share(key, cached);
    } catch {
      shareLater(key, cached, lock);
    }
    return cached;
  }

  /**
   * One try at a token other than `refused`: the shared one, else (elected by the lock) a new
   * one, else BUSY (another process holds the lock). Throws what failed: Redis, the provider,
   * or a failed grant's backoff.
   */
  async function attempt(key: string, request: ClientTokenRequest, other: (c: Cached | undefined) => Cached | undefined): Promise<Cached | typeof BUSY> {
    const shared = other(await readShared(key));
    if (shared) return shared;
    const failed = failing.pending(key);
    if (failed) throw retryLater(failed.error, failed.remainingMs);
    const lock = await tryLock(redis, keys.clientTokenLock(key), LOCK_TTL_MS);
    if (!lock) return BUSY;
    try {
      return other(await readShared(key)) ?? (await fetchAndShare(key, request, lock));
    } finally {
      // Not waited for: a token in hand is not held back by a Redis that hangs (the lock's TTL
      // frees it then, or shareLater's release once Redis answers again).
      void lock.release();
    }
  }

  /** A usable token other than `refused`: the shared one, or (elected by the lock) a new one. */
  async function obtain(key: string, request: ClientTokenRequest, refused?: string): Promise<string> {
    const deadline = performance.now() + maxWaitMs;
    const other = (c: Cached | undefined) => (c !== undefined && c.accessToken !== refused ? c : undefined);
    for (;;) {
      // A token of ours that has not expired serves whatever failed (Redis away, the provider
      // failing or backed off), as it was only due for renewal: a Redis outage failed every
      // client route from the skew on (503).
      const mine = other(local.get(key));
      const serving = mine && !hasExpired(mine, nowSeconds()) ? mine : undefined;
      let got: Cached | typeof BUSY;
      try {
        got = await attempt(key, request, other);
      } catch (err) {
        if (serving) return serving.accessToken;
        throw err;
      }
      if (got !== BUSY) {
        local.set(key, got);
        return got.accessToken;
      }
      // Another process is renewing (or one that died, until its lock lapses). Every call
      // waited up to maxWaitMs for a 502 behind a dead holder's lock.
      if (serving) return serving.accessToken;
      if (performance.now() > deadline) {
        throw new GatewayError('token_refresh_failed', { cause: new Error('timed out waiting for a client token') });
      }
      await sleep(50);
    }
  }

  /** After a refusal: a newer token if there is one, a new one if allowed, else undefined. */
  async function replace(key: string, request: ClientTokenRequest, refused: string): Promise<string | undefined> {
    const mine = local.get(key);
    if (usable(mine) && mine.accessToken !== refused) return mine.accessToken;
    const shared = await readShared(key);
    if (shared && shared.accessToken !== refused) {
      local.set(key, shared);
      return shared.accessToken;
    }
    if (!(await cooldown.clientToken(key, refused))) return undefined;
    return obtain(key, request, refused);
  }

  /** The grant's error, telling the browser when the provider will be asked again. */
  function retryLater(error: GatewayError, delayMs: number): GatewayError {
    const headers = { ...error.headers, 'Retry-After': String(Math.max(1, Math.ceil(delayMs / 1000))) };
    return new GatewayError(error.code, { cause: error.cause, description: error.description, headers, ...(error.details ? { details: error.details } : {}) });
  }

  /** In-process callers of one key share one promise. */
  function once<T>(flights: Map<string, Promise<T>>, key: string, work: () => Promise<T>): Promise<T> {
    const pending = flights.get(key);
    if (pending) return pending;
    const promise = work()
      .catch((err: unknown) => {
        throw err instanceof GatewayError ? err : storeUnavailable(err);
      })
      .finally(() => flights.delete(key));
    flights.set(key, promise);
    return promise;
  }

  return {
    get(request) {
      const key = cacheKey(request);
      const mine = local.get(key);
      if (usable(mine)) return Promise.resolve(mine.accessToken);
      return once(getting, key, () => obtain(key, request));
    },
    renew(request, refused) {
      const key = cacheKey(request);
      return once(renewing, `${key} ${refused}`, () => replace(key, request, refused));
    },
  };
}
