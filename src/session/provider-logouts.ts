/**
 * Back-channel logout (OIDC BCL 1.0) over the indexes: the sessions of a provider session
 * (`sid`) or of a whole user (`sub`) are ended, and a sign-in still in flight learns that its
 * provider session was logged out meanwhile:
 *
 *   sid:{digest(iss sid)}        SET  session digests
 *   sid-out:{digest(iss sid)}    a back-channel logout of that provider session (the digest of
 *                                its user, or '', and its iat), for as long as a sign-in may take
 */
import type { RedisClient } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import type { AuthData } from './data.js';
import type { EndReason } from './events.js';
import type { SessionRecords, StoredSession } from './records.js';
import type { EndedSession } from './succession.js';
import { TRANSACTION_TTL_SECONDS } from './transactions.js';
import { providerSessionDigest, prune, readIndex, userDigest, userOf } from './user-index.js';

export interface ProviderLogouts {
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

/**
 * Sessions one provider logout ends at once. In turn, each end's half-dozen round trips added
 * up: a logout by `sub` of a user's 1,000 sessions took 1,000 times them while the provider
 * waited for its answer (`npm run bench:backchannel`: 308 ms on loopback, 9 s with Redis 2 ms
 * away; 8 at once: 90 ms, 1.2 s).
 */
export const ENDS_AT_ONCE = 8;

/**
 * `work` for each item, at most `limit` at once. The first failure rejects, and no item is
 * started after it (those under way finish): as in turn, a failing Redis is not asked again and
 * again, and the provider's retry ends the rest.
 */
async function atMost<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < items.length) {
      await work(items[next++] as T).catch((err: unknown) => {
        failed = true;
        throw err;
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export interface ProviderLogoutDeps {
  redis: RedisClient;
  keys: Keys;
  records: SessionRecords;
  end(sessionDigest: string, reason: EndReason): Promise<StoredSession | undefined>;
  endedWithRevocation(sessionDigest: string): Promise<boolean>;
}

export function createProviderLogouts({ redis, keys, records, end, endedWithRevocation }: ProviderLogoutDeps): ProviderLogouts {
  /**
   * Whether the record of `d` names another user than `user`. One whose user is not known here
   * is not another's, so that the provider's logout ends it: a sign-in between its index entry
   * and its save (its note makes it end itself once saved; providers send sid and sub
   * together: oidc-provider, Keycloak), or a record that does not read here (sealed with a key
   * this process lacks, a key roll under way; or tampered), which a logout that skipped it left
   * alive on the instances that can read it.
   */
  async function ofAnotherUser(d: string, user: string): Promise<boolean> {
    const stored = await records.peek(d);
    return stored !== undefined && userOf(stored) !== user;
  }

  async function endAll(digests: readonly string[], user: string | undefined): Promise<EndedSession[]> {
    const ended: EndedSession[] = [];
    await atMost(digests, ENDS_AT_ONCE, async (d) => {
      // A token naming a user too ends no other user's session under its sid (a provider that
      // reuses sids, or a confused one): BCL §2.4 has both claims name the same sessions.
      if (user !== undefined && (await ofAnotherUser(d, user))) return;
      // A provider said so (back-channel logout, by sid or by sub).
      const stored = await end(d, 'provider-logout');
      if (stored) ended.push({ digest: d, stored });
    });
    return ended;
  }

  async function providerSessionEnded(iss: string, sid: string, sub: string, idTokenIat: number): Promise<boolean> {
    const note = await redis.get(keys.providerSessionEnded(providerSessionDigest(iss, sid)));
    if (note === null) return false;
    const [of, at] = note.split(' ');
    return (of === '' || of === userDigest(iss, sub)) && Number(at) >= idTokenIat;
  }

  return {
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
      await atMost(await readIndex(redis, userKey), ENDS_AT_ONCE, async (entry) => {
        // An entry copied here from another user's index (no key needed) ends nothing.
        if (await ofAnotherUser(entry.digest, user)) return;
        const stored = await end(entry.digest, 'provider-logout');
        if (stored) ended.push({ digest: entry.digest, stored });
        else await prune(redis, userKey, entry);
      });
      return ended;
    },
  };
}
