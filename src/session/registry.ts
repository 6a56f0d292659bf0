/**
 * Indexes of live sessions, so that a user's sessions can be listed and ended, and a provider
 * `sid` or `sub` (back-channel logout) found, without scanning keys:
 *
 *   user:{digest(iss sub)}  HASH handle -> session digest
 *   sid:{digest(iss sid)}   SET  session digests
 *
 * Index entries can outlive a session that timed out; every read checks the record and drops
 * stale entries, and the index keys expire with the absolute timeout. Single-key commands only
 * (the index and the record live in different Cluster slots).
 */
import type { RedisClient } from '../redis/client.js';
import { digest, type Keys } from '../redis/keys.js';
import type { AuthData } from './data.js';
import type { EndReason } from './events.js';
import type { SessionRecords, StoredSession } from './records.js';

export interface ListedSession {
  handle: string;
  digest: string;
  auth: AuthData;
  /** Epoch ms of the last request (derived from the sliding idle TTL). */
  lastActiveAt: number;
}

export interface EndedSession {
  digest: string;
  stored: StoredSession;
}

export interface SessionRegistry {
  register(sessionDigest: string, auth: AuthData): Promise<void>;
  /**
   * Removes the record and its index entries; returns what was stored (to revoke its tokens).
   * `reason` is what the session's open streams and event listeners are told (default logout).
   */
  end(sessionDigest: string, reason?: EndReason): Promise<StoredSession | undefined>;
  list(iss: string, sub: string): Promise<ListedSession[]>;
  /** Ends every session of a provider session (sid) or of a whole user (sub). */
  endByProviderSession(iss: string, sid: string): Promise<EndedSession[]>;
  endByUser(iss: string, sub: string): Promise<EndedSession[]>;
}

export interface RegistryOptions {
  redis: RedisClient;
  keys: Keys;
  records: SessionRecords;
  idleTimeoutSeconds: number;
  absoluteTimeoutSeconds: number;
  clock?: () => number;
  /** Called for each ended session (to close its streams on every instance, session/events.ts). */
  onEnded?: (sessionDigest: string, reason: EndReason) => void;
}

export const userDigest = (iss: string, sub: string) => digest(`${iss} ${sub}`);
export const providerSessionDigest = (iss: string, sid: string) => digest(`${iss} ${sid}`);

export function createSessionRegistry(options: RegistryOptions): SessionRegistry {
  const { redis, keys, records, idleTimeoutSeconds, absoluteTimeoutSeconds } = options;
  const clock = options.clock ?? Date.now;

  async function end(sessionDigest: string, reason: EndReason = 'logout'): Promise<StoredSession | undefined> {
    const stored = await records.peek(sessionDigest);
    await records.remove(sessionDigest);
    const auth = stored?.auth;
    if (auth) {
      await redis.hdel(keys.userSessions(userDigest(auth.iss, auth.sub)), auth.handle);
      if (auth.sid) await redis.srem(keys.providerSession(providerSessionDigest(auth.iss, auth.sid)), sessionDigest);
    }
    options.onEnded?.(sessionDigest, reason);
    return stored;
  }

  async function endAll(digests: Iterable<string>): Promise<EndedSession[]> {
    const ended: EndedSession[] = [];
    for (const d of digests) {
      // A provider said so (back-channel logout, by sid or by sub).
      const stored = await end(d, 'provider-logout');
      if (stored) ended.push({ digest: d, stored });
    }
    return ended;
  }

  return {
    async register(sessionDigest, auth) {
      const userKey = keys.userSessions(userDigest(auth.iss, auth.sub));
      await redis.hset(userKey, auth.handle, sessionDigest);
      await redis.expire(userKey, absoluteTimeoutSeconds);
      if (auth.sid) {
        const sidKey = keys.providerSession(providerSessionDigest(auth.iss, auth.sid));
        await redis.sadd(sidKey, sessionDigest);
        await redis.expire(sidKey, absoluteTimeoutSeconds);
      }
    },
    end,
    async list(iss, sub) {
      const userKey = keys.userSessions(userDigest(iss, sub));
      const entries = await redis.hgetall(userKey);
      const listed: ListedSession[] = [];
      for (const [handle, sessionDigest] of Object.entries(entries)) {
        const stored = await records.peek(sessionDigest);
        const remaining = stored ? await records.remainingMs(sessionDigest) : undefined;
        if (!stored?.auth || stored.auth.handle !== handle || remaining === undefined || !stored.tokens.sealed) {
          await redis.hdel(userKey, handle);
          continue;
        }
        listed.push({
          handle,
          digest: sessionDigest,
          auth: stored.auth,
          lastActiveAt: Math.min(clock(), clock() - (idleTimeoutSeconds * 1000 - remaining)),
        });
      }
      return listed.sort((a, b) => a.auth.createdAt - b.auth.createdAt);
    },
    async endByProviderSession(iss, sid) {
      const sidKey = keys.providerSession(providerSessionDigest(iss, sid));
      const digests = await redis.smembers(sidKey);
      const ended = await endAll(digests);
      await redis.del(sidKey);
      return ended;
    },
    async endByUser(iss, sub) {
      const userKey = keys.userSessions(userDigest(iss, sub));
      const ended = await endAll(Object.values(await redis.hgetall(userKey)));
      await redis.del(userKey);
      return ended;
    },
  };
}
