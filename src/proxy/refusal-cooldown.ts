/**
 * How often a token that an upstream refused (401 invalid_token) may be renewed by force.
 *
 * The refresh-and-retry-once of SPEC §4 exists for a token revoked before it expired. Unbounded,
 * it lets any caller turn an upstream that keeps refusing into one provider grant per request
 * (anonymous callers of `client` routes included). So a forced renewal happens only while the
 * refused token is still the current one (the callers check that) and, per session and resource
 * or per client-token cache key, for one refused token per interval, on all instances together:
 * the first caller claims the key for its token; callers refused the same token meanwhile may
 * join that renewal (the refresh coordinator and the client-token lock make it one provider
 * call), callers refused any other token get the upstream's 401 unchanged.
 *
 * Costs one Redis command, on the 401 path only.
 */
import type { Keys } from '../redis/keys.js';
import type { RedisClient } from '../redis/client.js';
import { digest } from '../redis/keys.js';
import { storeUnavailable } from '../redis/errors.js';

/**
 * 30 s: long enough that an upstream which refuses every token costs at most two grants a
 * minute per session or client-token cache key (a token the provider just issued and the
 * upstream still refuses is not going to be accepted on the next call either: wrong audience,
 * an upstream that has not fetched the new signing key yet); short enough that a second early
 * revocation of the same session's token, which is rare, is renewed on the SPA's next try.
 */
export const REFUSAL_COOLDOWN_MS = 30_000;

// Claims the key for this token unless another token holds it; 1 when the key is (now) ours.
const CLAIM = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
return 0`;

export interface RefusalCooldown {
  /** May the session's token for `resource` (undefined: the sign-in token), read at record `version`, be renewed now? */
  session(sessionDigest: string, resource: string | undefined, version: number): Promise<boolean>;
  /** May the client-credentials token `refused` of this cache key be replaced now? */
  clientToken(cacheKey: string, refused: string): Promise<boolean>;
}

export interface RefusalCooldownOptions {
  redis: RedisClient;
  keys: Keys;
  intervalMs?: number;
}

export function createRefusalCooldown(options: RefusalCooldownOptions): RefusalCooldown {
  const { redis, keys } = options;
  const intervalMs = options.intervalMs ?? REFUSAL_COOLDOWN_MS;

  async function claim(key: string, id: string): Promise<boolean> {
    try {
      return (await redis.eval(CLAIM, 1, key, id, intervalMs)) === 1;
    } catch (err) {
      throw storeUnavailable(err);
    }
  }

  return {
    session: (sessionDigest, resource, version) =>
      claim(keys.refusedSessionToken(sessionDigest, resource ? digest(resource) : ''), String(version)),
    // A digest: the token itself never goes to Redis unsealed.
    clientToken: (cacheKey, refused) => claim(keys.refusedClientToken(cacheKey), digest(refused)),
  };
}
