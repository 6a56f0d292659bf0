/**
 * The revocations that ended sessions still owe, journaled in Redis until the provider has
 * heard them, so that no process's death loses one.
 *
 * An end that revokes (a logout, the user ending a session, a back-channel logout, a sign-in
 * past `maxPerUser`) enlists the session here before it takes the record, and the take keeps a
 * sealed copy of the record (keys.takenRecord). The process that ended it revokes and then
 * releases both. Should it die between the take and the provider's answer, or the revocation
 * fail, the entry's lease lapses, and whichever process sweeps next takes it up from the copy,
 * again every lease, until it is heard or the copy expires. Before this, only the browser's
 * retried logout could find a copy: a user's DELETE /auth/sessions/{id} or a back-channel logout
 * killed after the take left the refresh token alive until it expired at the provider.
 *
 * Entries are scored by when a process last touched them, read on Redis's clock (TIME in the
 * scripts): a process whose clock runs ahead would take up every fresh entry at once, before its
 * owner had revoked it.
 */
import type { RedisClient } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { createTimed, type RedisObserver } from '../redis/timing.js';
import type { Sealer } from '../crypto/seal.js';
import { createRecordCodec, deserializeRecord, type StoredSession } from './record-codec.js';

/**
 * Redis's clock in ms. `1000.0`: the demo's Lua (ioredis-mock, fengari) multiplies integers in
 * 32 bits, and `* 1000` wrapped the score (found by review).
 */
const NOW_MS = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000.0 + math.floor(tonumber(t[2]) / 1000)`;

/** Enlists ARGV[1], touched now; the set lives as long as its newest entry may (ARGV[2] ms). */
const ENLIST = `
${NOW_MS}
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

/**
 * Up to ARGV[1] entries untouched for ARGV[2] ms, each touched again (claimed) by the caller;
 * returns the claim's score and how many entries untouched for ARGV[3] ms it dropped first, then
 * the members. Those had outlived any copy (kept for less than that from the last touch): no
 * sweep reached them, and every enlist extends the set's TTL, so nothing else would drop them
 * (found by red team: they piled up while no sweep ran, and the claims took them ahead of the
 * owed). The claim's score is half a millisecond past the clock, which no ENLIST writes: an end
 * enlisted in the same millisecond is told from the claim.
 */
const CLAIM_DUE = `
${NOW_MS}
local unreached = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. tostring(now - tonumber(ARGV[3])))
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]), 'LIMIT', 0, tonumber(ARGV[1]))
local claimed = now + 0.5
for _, member in ipairs(due) do redis.call('ZADD', KEYS[1], claimed, member) end
table.insert(due, 1, tostring(unreached))
table.insert(due, 1, tostring(claimed))
return due`;

/** Drops ARGV[1] if it is still as the claim at ARGV[2] left it (no end enlisted it since). */
const FORGET_CLAIMED = `
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0`;

/** Entries one sweep takes up, per process: a provider slow enough to outlast leases is not flooded. */
export const SWEEP_BATCH = 16;

export interface RevocationOutboxOptions {
  redis: RedisClient;
  keys: Keys;
  /** Opens a kept record's `auth` (the logout retry reads its handle). */
  sealer: Sealer;
  /**
   * How long an entry another process touched (enlisted, or claimed to try again) is left to it
   * before this process takes it up: each sweeper judges by its own lease, so that one whose
   * config differs neither waits on nor hurries the others.
   */
  leaseMs: number;
  /** How long a kept copy lives (records.take's ttlSeconds), and so how long a revocation is tried. */
  keptMs: number;
  observe?: RedisObserver;
}

/** What a sweep found for one entry whose lease lapsed, claimed at `claimedAt` (Redis ms). */
export type DueRevocation =
  /** The copy is gone (released, expired, or never taken): the entry is dropped. */
  | { digest: string; claimedAt: string; kept: false }
  /** The copy's token set, sealed as stored ('' for a record without tokens), and when the copy expires. */
  | { digest: string; claimedAt: string; kept: true; sealed: string; expiresInMs: number };

export interface RevocationOutbox {
  /** How long an entry a process touched is left to it (RevocationOutboxOptions.leaseMs). */
  readonly leaseMs: number;
  /** Before the take: the end's revocation is owed, and leased to the caller. */
  enlist(sessionDigest: string): Promise<void>;
  /** The copy a take kept (auth opened), left in place: a failed revocation is tried again. */
  kept(sessionDigest: string): Promise<StoredSession | undefined>;
  /** The revocation was heard (or there was nothing to revoke): the copy and the entry go. */
  release(sessionDigest: string): Promise<void>;
  /**
   * Entries whose lease lapsed, leased again to the caller, with what their copies hold; and how
   * many entries no sweep reached before their copies expired, dropped.
   */
  claimDue(limit?: number): Promise<{ due: DueRevocation[]; unreached: number }>;
  /**
   * Drops a claimed entry whose copy was gone, unless an end enlisted the session since (its
   * copy may exist by now: a session whose first end never took it, ended again).
   */
  forget(due: DueRevocation): Promise<void>;
  /**
   * Drops the entry of an end that took nothing, unless a copy another end kept is there (the
   * entry is that end's too). No copy can come later: the take left the end's note, and no
   * record is written over one.
   */
  dropUncopied(sessionDigest: string): Promise<void>;
}

export function createRevocationOutbox(options: RevocationOutboxOptions): RevocationOutbox {
  const { redis, keys, leaseMs, keptMs } = options;
  const timed = createTimed(options.observe);
  const codec = createRecordCodec(options.sealer);
  const outbox = keys.revocationOutbox();
  const zrem = async (d: string) => {
    await timed('revocation_outbox', () => redis.zrem(outbox, d));
  };

  /** A kept copy and how long it has left (ms; negative for none), in one round trip. */
  async function readCopy(d: string): Promise<{ text: unknown; ttlMs: number }> {
    const key = keys.takenRecord(d);
    const replies = (await redis.pipeline([['get', key], ['pttl', key]]).exec()) ?? [];
    const [[getErr, text] = [], [ttlErr, ttl] = []] = replies;
    if (getErr || ttlErr) throw getErr ?? ttlErr;
    // -1 (no expiry) is never written; anything but a number reads as expired.
    return { text, ttlMs: typeof ttl === 'number' ? ttl : 0 };
  }

  return {
    leaseMs,
    async enlist(d) {
      await timed('revocation_outbox', () => redis.eval(ENLIST, 1, outbox, d, String(keptMs + leaseMs)));
    },
    async kept(d) {
      const text = await timed('session_peek', () => redis.get(keys.takenRecord(d)));
      return typeof text === 'string' ? codec.deserialize(d, text) : undefined;
    },
    async release(d) {
      // Two slots in a Cluster: the copy first, so that an entry left by a failure finds it gone.
      await timed('session_delete', () => redis.del(keys.takenRecord(d)));
      await zrem(d);
    },
    async claimDue(limit = SWEEP_BATCH) {
      const answer = (await timed('revocation_outbox', () => redis.eval(CLAIM_DUE, 1, outbox, String(limit), String(leaseMs), String(keptMs + leaseMs)))) as unknown;
      const [claimedAt, dropped, ...digests] = Array.isArray(answer) ? answer.filter((d): d is string => typeof d === 'string') : [];
      const unreached = Number(dropped) || 0;
      if (claimedAt === undefined) return { due: [], unreached };
      const due = await Promise.all(
        digests.map(async (digest): Promise<DueRevocation> => {
          const { text, ttlMs } = await timed('session_peek', () => readCopy(digest));
          // Read without opening `auth`: only the sealed token set is needed, and a copy whose auth
          // is sealed with a key this process lacks still owes its revocation.
          const raw = typeof text === 'string' ? deserializeRecord(text) : undefined;
          return raw ? { digest, claimedAt, kept: true, sealed: raw.tokens.sealed, expiresInMs: Math.max(0, ttlMs) } : { digest, claimedAt, kept: false };
        }),
      );
      return { due, unreached };
    },
    async forget(due) {
      await timed('revocation_outbox', () => redis.eval(FORGET_CLAIMED, 1, outbox, due.digest, due.claimedAt));
    },
    async dropUncopied(d) {
      if ((await timed('session_peek', () => redis.exists(keys.takenRecord(d)))) === 0) await zrem(d);
    },
  };
}
