/**
 * The per-user index of sessions and its entries:
 *
 *   user:{digest(iss sub)}  HASH handle -> session digest, `pending:`digest until its record is saved
 *
 * and the digests the indexes are keyed by. Entries can outlive their session; readers check
 * the record and prune stale saved-form entries, only if no register rewrote them meanwhile.
 */
import type { RedisClient } from '../redis/client.js';
import { digest } from '../redis/keys.js';
import type { StoredSession } from './records.js';

export const PENDING = 'pending:';

export interface IndexEntry {
  handle: string;
  /** As stored, for the compare-and-delete. */
  value: string;
  digest: string;
  saved: boolean;
}

/** A user-index entry; a plain digest (also what 0.5.x wrote) is the saved form. */
function parseIndexEntry(handle: string, value: string): IndexEntry {
  return value.startsWith(PENDING)
    ? { handle, value, digest: value.slice(PENDING.length), saved: false }
    : { handle, value, digest: value, saved: true };
}

/** Deletes a user-index entry only if it still holds the value that was read. */
const PRUNE = `if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) else return 0 end`;

/**
 * A member and the key's expiry in one step: written as two commands, a sign-in whose EXPIRE
 * never landed (a timeout, a cut link, a killed process) left the key without a TTL for good,
 * holding a pending entry no reader prunes (found by the hygiene red team).
 */
const HSET_EXPIRING = `redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return redis.call('EXPIRE', KEYS[1], ARGV[3])`;
const SADD_EXPIRING = `redis.call('SADD', KEYS[1], ARGV[1]) return redis.call('EXPIRE', KEYS[1], ARGV[2])`;

export async function indexEntry(redis: RedisClient, userKey: string, handle: string, value: string, ttlSeconds: number): Promise<void> {
  await redis.eval(HSET_EXPIRING, 1, userKey, handle, value, String(ttlSeconds));
}

export async function indexMember(redis: RedisClient, setKey: string, member: string, ttlSeconds: number): Promise<void> {
  await redis.eval(SADD_EXPIRING, 1, setKey, member, String(ttlSeconds));
}

export const userDigest = (iss: string, sub: string) => digest(`${iss} ${sub}`);
export const providerSessionDigest = (iss: string, sid: string) => digest(`${iss} ${sid}`);
/** The user a record signs in (userDigest); undefined for one that signs no one in. */
export const userOf = (stored: StoredSession | undefined): string | undefined => stored?.auth && userDigest(stored.auth.iss, stored.auth.sub);

export async function readIndex(redis: RedisClient, userKey: string): Promise<IndexEntry[]> {
  return Object.entries(await redis.hgetall(userKey)).map(([handle, value]) => parseIndexEntry(handle, value));
}

/**
 * A saved-form entry whose session is gone, deleted only if no register rewrote it since it was
 * read. A pending one is a sign-in whose save is still to come (or never came: it expires with
 * the index key); deleting it could land after the callback's second register and leave the new
 * session unindexed.
 */
export async function prune(redis: RedisClient, userKey: string, entry: IndexEntry): Promise<void> {
  if (entry.saved) await redis.eval(PRUNE, 1, userKey, entry.handle, entry.value);
}
