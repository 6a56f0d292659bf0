/**
 * Client-credentials tokens for `auth: client` routes, shared by every gateway process.
 *
 * Lookup order: this process's copy → the sealed copy in Redis → the provider. Only one
 * process asks the provider per (scopes, resource) and expiry: a Redis lock elects it, the
 * others poll the cache (bounded), and callers within a process share one promise. A token is
 * renewed `skewSeconds` before it expires, so no request ever carries an expired one.
 */
import type { Sealer } from '../crypto/seal.js';
import { GatewayError } from '../errors.js';
import type { RedisClient } from '../redis/client.js';
import { digest, type Keys } from '../redis/keys.js';
import { sleep, tryLock } from '../redis/lock.js';
import { storeUnavailable } from '../redis/errors.js';
import { DEFAULT_TOKEN_LIFETIME_SECONDS } from '../session/tokens.js';

export interface ClientTokenRequest {
  scopes: readonly string[];
  resource?: string;
  /** Forget the cached token first (the upstream rejected it). */
  force?: boolean;
}

export interface FetchedClientToken {
  accessToken: string;
  /** Epoch seconds. */
  expiresAt?: number;
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
}

interface Cached {
  accessToken: string;
  expiresAt: number;
}

export type ClientTokens = (request: ClientTokenRequest) => Promise<string>;

export function createClientTokens(options: ClientTokenOptions): ClientTokens {
  const { redis, keys, sealer, skewSeconds, clock } = options;
  const maxWaitMs = options.maxWaitMs ?? 12_000;
  const local = new Map<string, Cached>();
  const inFlight = new Map<string, Promise<string>>();
  const nowSeconds = () => Math.floor(clock() / 1000);
  const usable = (c: Cached | undefined): c is Cached => c !== undefined && c.expiresAt - skewSeconds > nowSeconds();

  async function readShared(key: string): Promise<Cached | undefined> {
    const sealed = await redis.get(keys.clientToken(key));
    const json = sealed === null ? undefined : sealer.open(sealed, `client-token:${key}`);
    if (json === undefined) return undefined;
    const cached = JSON.parse(json) as Cached;
    return usable(cached) ? cached : undefined;
  }

  async function fetchAndShare(key: string, request: ClientTokenRequest): Promise<Cached> {
    let fetched: FetchedClientToken;
    try {
      fetched = await options.fetch(request);
      options.onFetch?.('success');
    } catch (err) {
      options.onFetch?.('failure');
      throw err instanceof GatewayError && err.code !== 'login_required' ? err : new GatewayError('token_refresh_failed', { cause: err });
    }
    const cached: Cached = {
      accessToken: fetched.accessToken,
      expiresAt: fetched.expiresAt ?? nowSeconds() + DEFAULT_TOKEN_LIFETIME_SECONDS,
    };
    const ttl = cached.expiresAt - skewSeconds - nowSeconds();
    if (ttl > 0) {
      await redis.set(keys.clientToken(key), sealer.seal(JSON.stringify(cached), `client-token:${key}`), 'EX', ttl);
    }
    return cached;
  }

  async function obtain(key: string, request: ClientTokenRequest): Promise<string> {
    const deadline = Date.now() + maxWaitMs;
    for (;;) {
      const shared = await readShared(key);
      if (shared) {
        local.set(key, shared);
        return shared.accessToken;
      }
      const lock = await tryLock(redis, keys.clientTokenLock(key), 15_000);
      if (lock) {
        try {
          const again = await readShared(key);
          const token = again ?? (await fetchAndShare(key, request));
          local.set(key, token);
          return token.accessToken;
        } finally {
          await lock.release();
        }
      }
      if (Date.now() > deadline) {
        throw new GatewayError('token_refresh_failed', { cause: new Error('timed out waiting for a client token') });
      }
      await sleep(50);
    }
  }

  return function clientToken(request) {
    const key = digest(`${[...request.scopes].sort().join(' ')}|${request.resource ?? ''}`);
    const mine = local.get(key);
    if (!request.force && usable(mine)) return Promise.resolve(mine.accessToken);
    const pending = inFlight.get(key);
    if (pending) return pending;
    const forget = async () => {
      local.delete(key);
      await redis.del(keys.clientToken(key));
    };
    const promise = (request.force ? forget() : Promise.resolve())
      .then(() => obtain(key, request))
      .catch((err: unknown) => {
        throw err instanceof GatewayError ? err : storeUnavailable(err);
      })
      .finally(() => inFlight.delete(key));
    inFlight.set(key, promise);
    return promise;
  };
}
