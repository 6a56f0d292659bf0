/**
 * The sign-ins of one browser that replace one another (two tabs, a step-up while another tab
 * signs in): whichever answer the browser takes last, its cookie overwrites the others', and
 * the sessions it overwrites are ended, not left to live on unseen (listed, their grant alive
 * after the browser signed out).
 *
 *   successor:{digest}      the sign-in that replaced a session (its cookie noted at /auth/login)
 *   predecessor:<digest>    a sign-in another of the same browser made, noted for it by the
 *                           digest of its login cookie, or of a pair of login cookies
 *
 * All for as long as a sign-in may take (TRANSACTION_TTL_SECONDS). Single-key commands only.
 */
import type { RedisClient } from '../redis/client.js';
import { digest, type Keys } from '../redis/keys.js';
import type { EndReason } from './events.js';
import type { StoredSession } from './records.js';
import { TRANSACTION_TTL_SECONDS } from './transactions.js';

/** A session an end took, with what its record held (to revoke its tokens). */
export interface EndedSession {
  digest: string;
  stored: StoredSession;
  /**
   * Replaced by another user's sign-in (a shared computer's next user): nothing holds its grant
   * now, and its end was noted as one that revokes. The same user's may share the grant with
   * the new session, and is kept.
   */
  otherUser?: true;
}

/** The sign-in being completed: the digest of its login cookie, the others in flight, its user. */
export interface SignedIn {
  own: string;
  inFlight: readonly string[];
  user: string;
}

export interface Succession {
  /**
   * Notes `successor` as the sign-in that replaced each of `replaced` (for as long as a sign-in
   * may take), and ends the one noted before it: two sign-ins of the same browser at once (two
   * tabs) replace the same session, and the earlier one's cookie is overwritten by the later's.
   * It lived on unseen, listed, its grant alive after the browser signed out. Returns what the
   * sessions it ended held.
   */
  succeed(replaced: Iterable<string>, successor: string, user: string): Promise<EndedSession[]>;
  /** Ends each of `digests` for a sign-in of `user` that replaced it (`replaced`); what they held. */
  replaceAll(digests: Iterable<string>, user: string): Promise<EndedSession[]>;
  /**
   * The sessions other sign-ins of this browser made that `successor` (the sign-in whose login
   * cookie's digest is `own`) overwrites in the browser, to be ended: one that completed before
   * it and noted itself for it, and one completing at the same time (the two callbacks carry
   * each other's login cookies: `inFlight`, and the later of the two to note itself on their
   * pair finds the earlier). Then notes `successor` for each sign-in still in flight, for as long
   * as a sign-in may take. Only the same user's: a login cookie planted in another's browser
   * cannot end their session. Two first sign-ins (two tabs, no session yet) left one behind.
   */
  rivals(own: string, inFlight: readonly string[], successor: string, user: string): Promise<string[]>;
  /**
   * Ends the sign-ins that replaced `sessionDigest` and those that replaced them (succeed()), for
   * a logout that must take the browser's sessions with it: a tab's sign-in that completed while
   * the logout waited on the provider had its cookie wiped by the logout's answer.
   */
  endSuccessors(sessionDigest: string, reason: EndReason): Promise<EndedSession[]>;
  /**
   * After a sign-in is saved: ends its rivals, then notes it as the successor of those and of
   * `replaced`. Returns what the sessions it ended held.
   */
  supersede(replaced: Iterable<string>, successor: string, signIn: SignedIn): Promise<EndedSession[]>;
}

/** How many sign-ins in a row, replacing one another, a late one of the same browser ends. */
const MAX_SUCCESSION = 8;
/** Notes the successor, returns the one noted before (GET then SET, in one step). */
const SUCCEED = `local before = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) return before`;

type End = (sessionDigest: string, reason: EndReason, how?: { revokes?: boolean }) => Promise<StoredSession | undefined>;
/** The digest of the user a session was signed in as (user-index.ts userDigest), if any. */
type UserOf = (sessionDigest: string) => Promise<string | undefined>;

export function createSuccession(redis: RedisClient, keys: Keys, end: End, userOf: UserOf): Succession {
  /**
   * Ends `sessionDigest` for a sign-in of `user` that replaced it, noting what it held in
   * `ended`. Whose it is is read before the end, so that the end is noted as revoking in the
   * same step as it removes the record: a refresh of it in flight then finds it gone, and
   * revokes what the provider answered it (runtime.ts revokeOrphan). A session's user never
   * changes, so the read cannot go stale.
   */
  async function replace(sessionDigest: string, user: string, ended: EndedSession[]): Promise<void> {
    const of = await userOf(sessionDigest);
    const otherUser = of !== undefined && of !== user;
    // Another user's tabs are told `revoked`: `replaced` tells an SPA to reconnect, and it went
    // on as the next user with the first one's data on screen (found by a red team in Chromium).
    // `revoked` revokes the grant (another user's must not live on); `replaced` does not.
    const stored = await end(sessionDigest, otherUser ? 'revoked' : 'replaced');
    if (stored) ended.push({ digest: sessionDigest, stored, ...(otherUser ? { otherUser } : {}) });
  }
  async function replaceAll(digests: Iterable<string>, user: string): Promise<EndedSession[]> {
    const ended: EndedSession[] = [];
    for (const d of digests) await replace(d, user, ended);
    return ended;
  }
  async function succeed(replaced: Iterable<string>, successor: string, user: string): Promise<EndedSession[]> {
    const ended: EndedSession[] = [];
    for (const old of replaced) {
      let before = (await redis.eval(SUCCEED, 1, keys.successor(old), successor, String(TRANSACTION_TTL_SECONDS))) as string | null;
      // And what replaced that in turn (a sign-in from the first tab's new session, meanwhile).
      for (let hop = 0; before !== null && before !== successor && hop < MAX_SUCCESSION; hop++) {
        await replace(before, user, ended);
        before = await redis.get(keys.successor(before));
      }
    }
    return ended;
  }
  async function rivals(own: string, inFlight: readonly string[], successor: string, user: string): Promise<string[]> {
    const note = `${successor} ${user}`;
    const found = new Set<string>();
    const consider = (value: unknown) => {
      const [sessionDigest, of] = typeof value === 'string' ? value.split(' ') : [];
      if (sessionDigest && of === user && sessionDigest !== successor) found.add(sessionDigest);
    };
    consider(await redis.get(keys.predecessor(own)));
    // In one step per pair (GET then SET): of two callbacks at once, exactly one finds the other.
    for (const other of inFlight) {
      const pair = digest([own, other].sort().join(' '));
      consider(await redis.eval(SUCCEED, 1, keys.predecessor(pair), note, String(TRANSACTION_TTL_SECONDS)));
    }
    for (const other of inFlight) await redis.set(keys.predecessor(other), note, 'EX', TRANSACTION_TTL_SECONDS);
    return [...found];
  }
  async function endSuccessors(sessionDigest: string, reason: EndReason): Promise<EndedSession[]> {
    const ended: EndedSession[] = [];
    const seen = new Set<string>();
    let next = await redis.get(keys.successor(sessionDigest));
    while (next !== null && !seen.has(next) && seen.size < MAX_SUCCESSION) {
      seen.add(next);
      const stored = await end(next, reason);
      if (stored) ended.push({ digest: next, stored });
      next = await redis.get(keys.successor(next));
    }
    return ended;
  }
  async function supersede(replaced: Iterable<string>, successor: string, { own, inFlight, user }: SignedIn): Promise<EndedSession[]> {
    const found = await rivals(own, inFlight, successor, user);
    const ended = await replaceAll(found, user);
    return [...ended, ...(await succeed([...replaced, ...found], successor, user))];
  }

  return { succeed, replaceAll, rivals, endSuccessors, supersede };
}
