/**
 * Indexes of live sessions, so that a user's sessions can be listed and ended, and a provider
 * `sid` or `sub` (back-channel logout) found, without scanning keys:
 *
 *   user:{digest(iss sub)}  HASH handle -> session digest, `pending:`digest until its record is saved
 *   sid:{digest(iss sid)}   SET  session digests
 *   sid-out:{digest(iss sid)}    a back-channel logout of that provider session (the digest of
 *                                its user, or '', and its iat), for as long as a sign-in may take
 *
 * Index entries can outlive a session that timed out; every read checks the record and drops
 * stale entries, and the index keys expire with the absolute timeout. Single-key commands only
 * (the index and the record live in different Cluster slots), so a reader cannot check the
 * record and delete the entry atomically: the `pending:` form is what tells a sign-in whose
 * record is not saved yet from a session that is gone (see list()).
 */
import type { RedisClient } from '../redis/client.js';
import { digest, type Keys } from '../redis/keys.js';
import { mayHaveRun } from '../redis/errors.js';
import type { AuthData } from './data.js';
import type { EndReason } from './events.js';
import type { SessionRecords, StoredSession } from './records.js';
import { UNSAVED_KEEP_MS } from './unsaved-refreshes.js';
import { TRANSACTION_TTL_SECONDS } from './transactions.js';
import { createSuccession, type EndedSession, type Succession } from './succession.js';

export interface ListedSession {
  handle: string;
  digest: string;
  auth: AuthData;
  /** Epoch ms of the last request (derived from the sliding idle TTL). */
  lastActiveAt: number;
}

export type { EndedSession } from './succession.js';

/**
 * How a user-index entry is written: `pending` before the session's record is saved (a sign-in
 * in progress, never pruned), `saved` once it is (pruned when its record is gone).
 */
export type IndexForm = 'pending' | 'saved';

export interface EndOptions {
  keep?: boolean;
  revokes?: boolean;
}

export interface SessionRegistry extends Succession {
  register(sessionDigest: string, auth: AuthData, form: IndexForm): Promise<void>;
  /**
   * Removes the record and its index entries; returns what was stored (to revoke its tokens).
   * `reason` is what the session's open streams and event listeners are told (default logout).
   * With `keep`, the record is also kept as stored until its caller's request deletes it
   * (store destroy): should the removal time out yet land, the retry reclaims it. `revokes`
   * overrides whether the end is noted as one that revokes the session's tokens (REVOKING).
   */
  end(sessionDigest: string, reason?: EndReason, how?: EndOptions): Promise<StoredSession | undefined>;
  /**
   * What an end with `keep` took and its request never heard back about (Redis answered
   * too late), taken once; the index entries that request never removed go with it.
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
   * Ends every session of a provider session (sid) or of a whole user (sub). With `sub` as well
   * (a logout token naming both), only the sid's sessions of that user.
   */
  endByProviderSession(iss: string, sid: string, sub: string | undefined, issuedAt: number): Promise<EndedSession[]>;
  /**
   * Whether a back-channel logout of this provider session (of this user, or naming none),
   * issued no earlier than the sign-in's ID token (`idTokenIat`; both the provider's clock),
   * came within the last ten minutes: a sign-in whose code was exchanged before it, and indexed
   * after it read the index, ends itself (the callback); a later sign-in of a provider that
   * kept the sid does not. Read after the sign-in's index entry is written, as the logout
   * writes its note before it reads the index: one of the two sees the other.
   */
  providerSessionEnded(iss: string, sid: string, sub: string, idTokenIat: number): Promise<boolean>;
  /**
   * Whether a sign-in (`auth`, its ID token issued at `idTokenIat`), now indexed and saved as
   * `sessionDigest`, was logged out by its provider meanwhile: a back-channel logout that found
   * its index entry without a record (endedWithRevocation), or one that came before the entry
   * was written (providerSessionEnded).
   */
  endedDuringSignIn(sessionDigest: string, auth: AuthData, idTokenIat: number): Promise<boolean>;
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
  /** An ended session's index entries could not be removed (readers drop them: the record is gone). */
  onIndexError?: (err: unknown) => void;
}

const PENDING = 'pending:';

interface IndexEntry {
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
 * The ends that revoke the session's tokens, by their caller (a logout, a provider's logout, the
 * user ending a session) or by the provider itself (a refused refresh); not `replaced` (the grant
 * may live on in the new session) nor `expired`.
 */
const REVOKING: ReadonlySet<EndReason> = new Set<EndReason>(['logout', 'provider-logout', 'revoked']);
/**
 * As long as a set kept for Redis may still be written (and so orphaned): longer than any
 * refresh takes too (a DPoP refresh with a nonce retry: about 21 s).
 */
const ENDED_MEMORY_SECONDS = UNSAVED_KEEP_MS / 1000;

export const userDigest = (iss: string, sub: string) => digest(`${iss} ${sub}`);
export const providerSessionDigest = (iss: string, sid: string) => digest(`${iss} ${sid}`);
/** The user a record signs in (userDigest); undefined for one that signs no one in. */
const userOf = (stored: StoredSession | undefined): string | undefined => stored?.auth && userDigest(stored.auth.iss, stored.auth.sub);

export function createSessionRegistry(options: RegistryOptions): SessionRegistry {
  const { redis, keys, records, idleTimeoutSeconds, absoluteTimeoutSeconds } = options;
  const clock = options.clock ?? Date.now;

  async function end(sessionDigest: string, reason: EndReason = 'logout', how: EndOptions = {}): Promise<StoredSession | undefined> {
    const revokes = how.revokes ?? REVOKING.has(reason);
    // With the record goes, in the same step, the note that its end revokes: a refresh whose
    // compare-and-set then finds it gone revokes the tokens the provider issued it (runtime.ts,
    // onOrphaned). No removal without its note, and a note without a record too: a sign-in
    // between its index entry and its save finds it once saved, and ends itself (the callback).
    let stored: StoredSession | undefined;
    try {
      // The note is read only for whether the end revokes (endedWithRevocation), by every
      // process version: a revoking end whose reason is not one (another user's session,
      // replaced) is noted as `revoked`.
      const noted = revokes && !REVOKING.has(reason) ? 'revoked' : reason;
      stored = await records.take(sessionDigest, { reason: noted, ttlSeconds: ENDED_MEMORY_SECONDS, revokes, keep: how.keep === true });
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
    // instance and its caller revokes its tokens.
    await unindex(sessionDigest, stored);
    options.onEnded?.(sessionDigest, reason);
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

  /** A saved-form entry whose session is gone, deleted only if no register rewrote it since it was read. */
  async function prune(userKey: string, entry: IndexEntry): Promise<void> {
    if (entry.saved) await redis.eval(PRUNE, 1, userKey, entry.handle, entry.value);
  }

  async function endedWithRevocation(sessionDigest: string): Promise<boolean> {
    return REVOKING.has((await redis.get(keys.endedSession(sessionDigest))) as EndReason);
  }

  async function providerSessionEnded(iss: string, sid: string, sub: string, idTokenIat: number): Promise<boolean> {
    const note = await redis.get(keys.providerSessionEnded(providerSessionDigest(iss, sid)));
    if (note === null) return false;
    const [of, at] = note.split(' ');
    return (of === '' || of === userDigest(iss, sub)) && Number(at) >= idTokenIat;
  }

  async function readIndex(userKey: string): Promise<IndexEntry[]> {
    return Object.entries(await redis.hgetall(userKey)).map(([handle, value]) => parseIndexEntry(handle, value));
  }

  /**
   * Whether the record of `d` names another user than `user`, or does not read (it signs no one
   * in). A member with no record yet is a sign-in between its index entry and its save, whose
   * user is not known: not another's, so that it is ended (its note makes it end itself once
   * saved), as providers send sid and sub together (oidc-provider, Keycloak).
   */
  async function ofAnotherUser(d: string, user: string): Promise<boolean> {
    const stored = await records.peek(d);
    if (stored) return userOf(stored) !== user;
    return (await records.exist([d]))[0] === true;
  }

  async function endAll(digests: Iterable<string>, user: string | undefined): Promise<EndedSession[]> {
    const ended: EndedSession[] = [];
    for (const d of digests) {
      // A token naming a user too ends no other user's session under its sid (a provider that
      // reuses sids, or a confused one): BCL §2.4 has both claims name the same sessions.
      if (user !== undefined && (await ofAnotherUser(d, user))) continue;
      // A provider said so (back-channel logout, by sid or by sub).
      const stored = await end(d, 'provider-logout');
      if (stored) ended.push({ digest: d, stored });
    }
    return ended;
  }

  return {
    ...createSuccession(redis, keys, end, async (d) => userOf(await records.peek(d))),
    async register(sessionDigest, auth, form) {
      const userKey = keys.userSessions(userDigest(auth.iss, auth.sub));
      await redis.hset(userKey, auth.handle, form === 'pending' ? PENDING + sessionDigest : sessionDigest);
      await redis.expire(userKey, absoluteTimeoutSeconds);
      if (auth.sid) {
        const sidKey = keys.providerSession(providerSessionDigest(auth.iss, auth.sid));
        await redis.sadd(sidKey, sessionDigest);
        await redis.expire(sidKey, absoluteTimeoutSeconds);
      }
    },
    end,
    async reclaim(sessionDigest) {
      const stored = await records.takeKept(sessionDigest);
      await unindex(sessionDigest, stored);
      return stored;
    },
    endedWithRevocation,
    async list(iss, sub) {
      const user = userDigest(iss, sub);
      const userKey = keys.userSessions(user);
      const listed: ListedSession[] = [];
      for (const entry of await readIndex(userKey)) {
        const { handle } = entry;
        const stored = await records.peek(entry.digest);
        const remaining = stored ? await records.remainingMs(entry.digest) : undefined;
        // The record's own user too: an entry copied into this index from another user's (no
        // key needed) listed that session here, and DELETE /auth/sessions/{id} ended it.
        if (!stored?.auth || userOf(stored) !== user || stored.auth.handle !== handle || remaining === undefined || !stored.tokens.sealed) {
          // A pending entry without its record is a sign-in whose save is still to come (or never
          // came: it expires with the index key); deleting it could land after the callback's
          // second register and leave the new session unindexed. A saved one is a session that is
          // gone, deleted only if no register rewrote it since it was read.
          await prune(userKey, entry);
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
    },
    async endByProviderSession(iss, sid, sub, issuedAt) {
      const sidDigest = providerSessionDigest(iss, sid);
      const user = sub === undefined ? undefined : userDigest(iss, sub);
      // Noted before the index is read: see providerSessionEnded.
      await redis.set(keys.providerSessionEnded(sidDigest), `${user ?? ''} ${issuedAt}`, 'EX', TRANSACTION_TTL_SECONDS);
      // No DEL of the set afterwards: a sign-in with this sid registered since the read would
      // leave it. end() takes each ended session out; members without a record expire with it.
      return endAll(await redis.smembers(keys.providerSession(sidDigest)), user);
    },
    providerSessionEnded,
    async endedDuringSignIn(sessionDigest, auth, idTokenIat) {
      if (await endedWithRevocation(sessionDigest)) return true;
      return auth.sid !== undefined && providerSessionEnded(auth.iss, auth.sid, auth.sub, idTokenIat);
    },
    async endByUser(iss, sub) {
      const user = userDigest(iss, sub);
      const userKey = keys.userSessions(user);
      // No DEL of the index afterwards: a sign-in registered since the read (its second register
      // in particular) would lose its entry. end() removes the entries of the sessions it ends;
      // of the others, the saved-form ones without a record go, as in list().
      const ended: EndedSession[] = [];
      for (const entry of await readIndex(userKey)) {
        // An entry copied here from another user's index (no key needed) ends nothing.
        if (await ofAnotherUser(entry.digest, user)) continue;
        const stored = await end(entry.digest, 'provider-logout');
        if (stored) ended.push({ digest: entry.digest, stored });
        else await prune(userKey, entry);
      }
      return ended;
    },
  };
}
