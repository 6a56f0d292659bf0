/**
 * Indexes of live sessions, so that a user's sessions can be listed and ended, and a provider
 * `sid` or `sub` (back-channel logout, provider-logouts.ts) found, without scanning keys: the
 * user index (user-index.ts), and each session's digest in the set of its provider session.
 *
 * Index entries can outlive a session that timed out; every read checks the record and drops
 * stale entries, and the index keys expire with the absolute timeout. Single-key commands only
 * (the index and the record live in different Cluster slots), so a reader cannot check the
 * record and delete the entry atomically: the `pending:` form is what tells a sign-in whose
 * record is not saved yet from a session that is gone (see list()).
 */
import type { RedisClient } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { mayHaveRun } from '../redis/errors.js';
import type { AuthData } from './data.js';
import type { EndReason } from './events.js';
import type { SessionRecords, StoredSession } from './records.js';
import type { RevocationOutbox } from './revocation-outbox.js';
import { UNSAVED_KEEP_MS } from './unsaved-refreshes.js';
import { MAX_CLOCK_SKEW_SECONDS } from '../clock.js';
import { createSuccession, type Succession } from './succession.js';
import { createProviderLogouts, type ProviderLogouts } from './provider-logouts.js';
import { indexEntry, indexMember, PENDING, providerSessionDigest, prune, readIndex, userDigest, userOf } from './user-index.js';

export interface ListedSession {
  handle: string;
  digest: string;
  auth: AuthData;
  /** Epoch ms of the last request (derived from the sliding idle TTL). */
  lastActiveAt: number;
}

export type { EndedSession } from './succession.js';
export { providerSessionDigest, userDigest } from './user-index.js';

/**
 * How a user-index entry is written: `pending` before the session's record is saved (a sign-in
 * in progress, never pruned), `saved` once it is (pruned when its record is gone).
 */
export type IndexForm = 'pending' | 'saved';

export interface EndOptions {
  /** Default: whether the end revokes (and is not applied again); see end(). */
  keep?: boolean;
  revokes?: boolean;
  /** An end applied again (unreplicated-writes.ts): not handed to afterEnd a second time. */
  again?: boolean;
}

export interface SessionRegistry extends Succession, ProviderLogouts {
  /** The user (user-index.ts userDigest) a session signs in, while it lives. */
  userOf(sessionDigest: string): Promise<string | undefined>;
  register(sessionDigest: string, auth: AuthData, form: IndexForm): Promise<void>;
  /**
   * Removes the record and its index entries; returns what was stored (to revoke its tokens).
   * `reason` is what the session's open streams and event listeners are told (default logout).
   * `revokes` overrides whether the end is noted as one that revokes the session's tokens
   * (REVOKING). With `keep` (the default for an end that revokes), the revocation is journaled
   * first (revocation-outbox.ts) and the record kept as stored until its tokens are revoked
   * (release()): should the removal time out yet land, or the process die revoking, a retried
   * logout reclaims it, and any process's sweep revokes it once the lease lapses.
   */
  end(sessionDigest: string, reason?: EndReason, how?: EndOptions): Promise<StoredSession | undefined>;
  /**
   * What an end with `keep` kept and was never released (Redis answered too late, the process
   * died before the tokens were revoked, or the revocation failed), read in place until released;
   * the index entries that request never removed go as it is read.
   */
  reclaim(sessionDigest: string): Promise<StoredSession | undefined>;
  /**
   * Whether the session was ended, within the last ten minutes, by an end that revokes its
   * tokens (REVOKING), whatever ended it again after; not only by a new sign-in of the same
   * browser (`replaced`), which may share the provider's grant, nor by a timeout.
   */
  endedWithRevocation(sessionDigest: string): Promise<boolean>;
  list(iss: string, sub: string): Promise<ListedSession[]>;
  /**
   * Ends the oldest sessions of `auth`'s user past `max`, never `keep` (the sign-in just made)
   * nor one signed in after it, as `expired`. Each is returned with whether its tokens are to be revoked: not when it shares
   * `auth`'s provider session (sid), whose grant the provider may share with the new session.
   */
  trim(keep: string, auth: AuthData, max: number): Promise<TrimmedSession[]>;
}

export interface TrimmedSession {
  digest: string;
  stored: StoredSession;
  revokes: boolean;
}

export interface RegistryOptions {
  redis: RedisClient;
  keys: Keys;
  records: SessionRecords;
  /** Journals the revocations ends with `keep` owe. */
  outbox: RevocationOutbox;
  idleTimeoutSeconds: number;
  absoluteTimeoutSeconds: number;
  clock?: () => number;
  /** Called for each ended session (to close its streams on every instance, session/events.ts). */
  onEnded?: (sessionDigest: string, reason: EndReason) => void;
  /** An ended session's index entries could not be removed (readers drop them: the record is gone). */
  onIndexError?: (err: unknown) => void;
  /** The revocation journal could not be written (the end goes on; its revocation is tried once). */
  onJournalError?: (err: unknown) => void;
  /** After each end is written, not waited for (a Sentinel master's replicas' acknowledgement, unreplicated-writes.ts). */
  afterEnd?: (sessionDigest: string, reason: EndReason, revokes: boolean) => Promise<void>;
}

/**
 * The ends that revoke the session's tokens, by their caller (a logout, a provider's logout, the
 * user ending a session) or by the provider itself (a refused refresh); not `replaced` (the grant
 * may live on in the new session) nor `expired`.
 */
const REVOKING: ReadonlySet<EndReason> = new Set<EndReason>(['logout', 'provider-logout', 'revoked']);
/**
 * As long as a set kept for Redis may still be written (and so orphaned): longer than any
 * refresh takes too (a DPoP refresh with a nonce retry: about 21 s).
 */
export const ENDED_MEMORY_SECONDS = UNSAVED_KEEP_MS / 1000;

export function createSessionRegistry(options: RegistryOptions): SessionRegistry {
  const { redis, keys, records, outbox, idleTimeoutSeconds, absoluteTimeoutSeconds } = options;
  const clock = options.clock ?? Date.now;
  // A session ends at its signer's clock reading plus the timeout, judged by whichever process
  // serves it; its index entries expire on Redis's clock. Without the margin, a process behind
  // the signer served a session whose entries were gone: unlisted, and a back-channel logout
  // missed it (found by red team). Entries that outlive their session are dropped by readers.
  const indexTtlSeconds = absoluteTimeoutSeconds + MAX_CLOCK_SKEW_SECONDS;
  const sessionUser = async (d: string) => userOf(await records.peek(d));

  async function end(sessionDigest: string, reason: EndReason = 'logout', how: EndOptions = {}): Promise<StoredSession | undefined> {
    const revokes = how.revokes ?? REVOKING.has(reason);
    const keep = how.keep ?? (revokes && !how.again);
    // With the record goes, in the same step, the note that its end revokes: a refresh whose
    // compare-and-set then finds it gone revokes the tokens the provider issued it (runtime.ts,
    // onOrphaned). No removal without its note, and a note without a record too: a sign-in
    // between its index entry and its save finds it once saved, and ends itself (the callback).
    let stored: StoredSession | undefined;
    // Owed before it is taken: a process that dies after the take has left its entry (one whose
    // take never came has no copy, and a sweep drops it). One Redis would not write does not stop
    // the end: the set is one key, on one Cluster shard, whose outage failed every logout of the
    // deployment (found by review); such an end is revoked as before the journal, once.
    if (keep) await outbox.enlist(sessionDigest).catch((err: unknown) => options.onJournalError?.(err));
    try {
      // The note is read only for whether the end revokes (endedWithRevocation), by every
      // process version: a revoking end whose reason is not one (a trimmed session, `expired`)
      // is noted as `revoked`.
      const noted = revokes && !REVOKING.has(reason) ? 'revoked' : reason;
      stored = await records.take(sessionDigest, { reason: noted, ttlSeconds: ENDED_MEMORY_SECONDS, revokes, keep });
    } catch (err) {
      // A command that may have run (it timed out, or its connection dropped with it in flight)
      // ended the session as far as anyone knows: its streams on every instance are told all
      // the same, or they stayed open on a session gone for good. Should it have survived, a
      // page whose stream closed reads it again on its next call. One that Redis refused, or
      // that was never sent (Redis away), ended nothing, and is not announced.
      if (mayHaveRun(err)) options.onEnded?.(sessionDigest, reason);
      throw err;
    }
    // From here the session is over, whatever fails next: its streams are told on every
    // instance and its caller revokes its tokens. The entry is settled by what the take found.
    // An end that took nothing owes nothing: left for the sweeps, such entries (a logout by `sub`
    // over expired sessions) crowded out the owed. One whose copy is kept is enlisted again: a
    // take later than a lease let another process's sweep claim the entry, find no copy yet and
    // drop it, and the copy was owed by no one (found by red team). Touched now, the entry is
    // this process's for a lease again, and no drop of the earlier claim takes it
    // (FORGET_CLAIMED compares the claim's score).
    if (keep) await (stored ? outbox.enlist(sessionDigest) : outbox.dropUncopied(sessionDigest)).catch((err: unknown) => options.onJournalError?.(err));
    await unindex(sessionDigest, stored);
    options.onEnded?.(sessionDigest, reason);
    // Not waited for: what it remembers is this process's, whether or not the caller answered,
    // and an end of many sessions (a back-channel logout by sub) waited for each in turn.
    if (!how.again) void options.afterEnd?.(sessionDigest, reason, revokes);
    return stored;
  }

  /** An index entry left behind points at a record that is gone, which every reader drops. */
  async function unindex(sessionDigest: string, stored: StoredSession | undefined): Promise<void> {
    const auth = stored?.auth;
    try {
      if (auth) {
        await Promise.all([
          redis.hdel(keys.userSessions(userDigest(auth.iss, auth.sub)), auth.handle),
          auth.sid ? redis.srem(keys.providerSession(providerSessionDigest(auth.iss, auth.sid)), sessionDigest) : undefined,
        ]);
      }
    } catch (err) {
      options.onIndexError?.(err);
    }
  }

  async function endedWithRevocation(sessionDigest: string): Promise<boolean> {
    return REVOKING.has((await redis.get(keys.endedSession(sessionDigest))) as EndReason);
  }

  async function list(iss: string, sub: string): Promise<ListedSession[]> {
    const user = userDigest(iss, sub);
    const userKey = keys.userSessions(user);
    const listed: ListedSession[] = [];
    for (const entry of await readIndex(redis, userKey)) {
      const { handle } = entry;
      const stored = await records.peek(entry.digest);
      const remaining = stored ? await records.remainingMs(entry.digest) : undefined;
      // The record's own user too: an entry copied into this index from another user's (no
      // key needed) listed that session here, and DELETE /auth/sessions/{id} ended it.
      if (!stored?.auth || userOf(stored) !== user || stored.auth.handle !== handle || remaining === undefined || !stored.tokens.sealed) {
        // A record that is there but does not read here is kept: sealed with a key this
        // process lacks (a key roll under way), it is another instance's live session, and
        // pruning its entry hid it from the list and from a back-channel logout by sub.
        if (!stored && (await records.exist([entry.digest]))[0] === true) continue;
        // Only a saved-form entry goes (see prune): a pending one is a sign-in still saving.
        await prune(redis, userKey, entry);
        continue;
      }
      // A pending entry with its record (the second register failed) is a live session.
      listed.push({
        handle,
        digest: entry.digest,
        auth: stored.auth,
        lastActiveAt: Math.min(clock(), clock() - (idleTimeoutSeconds * 1000 - remaining)),
      });
    }
    return listed.sort((a, b) => a.auth.createdAt - b.auth.createdAt);
  }

  return {
    ...createSuccession(redis, keys, end, sessionUser),
    userOf: sessionUser,
    ...createProviderLogouts({ redis, keys, records, end, endedWithRevocation }),
    async register(sessionDigest, auth, form) {
      const userKey = keys.userSessions(userDigest(auth.iss, auth.sub));
      await indexEntry(redis, userKey, auth.handle, form === 'pending' ? PENDING + sessionDigest : sessionDigest, indexTtlSeconds);
      if (auth.sid) await indexMember(redis, keys.providerSession(providerSessionDigest(auth.iss, auth.sid)), sessionDigest, indexTtlSeconds);
    },
    end,
    async reclaim(sessionDigest) {
      const stored = await outbox.kept(sessionDigest);
      await unindex(sessionDigest, stored);
      return stored;
    },
    endedWithRevocation,
    list,
    async trim(keep, auth, max) {
      // One HLEN per sign-in; the index is read whole only once it may hold too many.
      if ((await redis.hlen(keys.userSessions(userDigest(auth.iss, auth.sub)))) <= max) return [];
      const listed = await list(auth.iss, auth.sub);
      const trimmed: TrimmedSession[] = [];
      // Only sessions older than this sign-in: a newer one's own trim sees this one. Counting
      // them, two sign-ins at once (with a cap of 1) each ended the other, and no session was left.
      const older = listed.filter((s) => s.digest !== keep && s.auth.createdAt < auth.createdAt);
      for (const oldest of older.slice(0, Math.max(0, listed.length - max))) {
        const revokes = auth.sid === undefined || oldest.auth.sid !== auth.sid;
        const stored = await end(oldest.digest, 'expired', { revokes });
        if (stored) trimmed.push({ digest: oldest.digest, stored, revokes });
      }
      return trimmed;
    },
  };
}
