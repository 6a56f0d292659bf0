/**
 * registry.end when Redis fails the removal (session/registry.ts): a command that timed out may
 * still run, so the end is announced (other instances' streams close); one refused or never
 * sent ended nothing, so it is not (a page was told "your session has ended" while it worked).
 * An end leaves its note (the TAKE script) in the same step, with or without a record, and a
 * whole-record write never brings an ended session back.
 *
 * Fails if, in registry.end, the announcement is made on any failure (`if (mayHaveRun(err))`
 * dropped), or never (the line removed); if redis/errors.ts mayHaveRun takes a dropped
 * connection for a command never sent, or one every Cluster node redirected for one that may
 * have run (its `Too many Cluster redirections` line removed); if TAKE writes the note only with a record, or lets a
 * later end that does not revoke replace one that does (`ARGV[3] == '1' or` → `true or`).
 */
import { randomBytes } from 'node:crypto';
import { createSealer } from '../../../src/crypto/seal.js';
import { createKeys, digest } from '../../../src/redis/keys.js';
import { createMemoryRedis } from '../../../src/redis/memory.js';
import type { RedisClient } from '../../../src/redis/client.js';
import type { AuthData } from '../../../src/session/data.js';
import { createSessionRecords } from '../../../src/session/records.js';
import { createRevocationOutbox } from '../../../src/session/revocation-outbox.js';
import { createSessionRegistry } from '../../../src/session/registry.js';
import { eventually } from '../../support/wait.js';

/** Each test's memory Redis, disconnected after it (each connected one listens on a shared emitter). */
const opened: RedisClient[] = [];
afterEach(() => {
  for (const r of opened.splice(0)) r.disconnect();
});

/** The memory Redis, whose commands fail with `failure` while it is set. */
function failingRedis() {
  const raw = createMemoryRedis();
  opened.push(raw);
  const state: { failure: Error | undefined } = { failure: undefined };
  const redis = new Proxy(raw, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => (state.failure ? Promise.reject(state.failure) : (value as (...a: unknown[]) => unknown).apply(target, args));
    },
  }) as RedisClient;
  return { redis, raw: raw as RedisClient, state };
}

/** The journal's commands do not fail: only the removal's do. */
async function setUp() {
  const { redis, raw, state } = failingRedis();
  const keys = createKeys('registry-end:');
  const base = { keys, idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600 };
  const sealer = createSealer([randomBytes(32).toString('base64')]);
  const records = createSessionRecords({ ...base, redis, sealer });
  const outbox = createRevocationOutbox({ redis: raw, keys, sealer, leaseMs: 60_000, keptMs: 600_000 });
  const announced: string[] = [];
  const registry = createSessionRegistry({ ...base, redis, records, outbox, onEnded: (d, reason) => announced.push(`${d} ${reason}`) });
  const auth: AuthData = { handle: 'h', sub: 'alice', iss: 'https://idp.example', claims: {}, scopes: ['openid'], createdAt: Date.now() };
  const d = digest(randomBytes(16).toString('hex'));
  await records.write(d, { tokens: { v: 1, sealed: 'v1.k.iv.ct' }, auth, cookie: { path: '/' } });
  return { redis, state, keys, records, outbox, registry, announced, d };
}

describe('registry.end when Redis fails the removal', () => {
  it('announces an end whose command timed out (it may still run)', async () => {
    const { state, registry, announced, d } = await setUp();
    state.failure = new Error('Command timed out');
    await expect(registry.end(d, 'revoked')).rejects.toThrow('Command timed out');
    expect(announced).toEqual([`${d} revoked`]);
  });

  it('announces an end whose connection dropped with it sent (it may have run)', async () => {
    const { state, registry, announced, d } = await setUp();
    state.failure = Object.assign(new Error('Reached the max retries per request limit (which is 0).'), { name: 'MaxRetriesPerRequestError' });
    await expect(registry.end(d, 'logout')).rejects.toThrow(/max retries/);
    expect(announced).toEqual([`${d} logout`]);
  });


  it.each([
    ['never sent while Redis was away', Object.assign(new Error("Stream isn't writeable and enableOfflineQueue options is false"), {})],
    ['never sent on a closed connection', new Error('Connection is closed.')],
    ['refused by Redis (an ACL, a failed script)', Object.assign(new Error("NOPERM this user has no permissions to run the 'del' command"), { name: 'ReplyError' })],
    // A Cluster slot held mid-migration: TRYAGAIN until ioredis gave up (found by red team: the
    // session's streams were told `signed-out` while it lived on).
    ['redirected until ioredis gave up (a slot being migrated)', new Error('Too many Cluster redirections. Last error: ReplyError: TRYAGAIN Multiple keys request during rehashing of slot')],
  ])('does not announce an end Redis never ran: %s', async (_name, failure) => {
    const { state, records, registry, announced, d } = await setUp();
    state.failure = failure;
    await expect(registry.end(d, 'revoked')).rejects.toThrow();
    state.failure = undefined;
    expect(await records.peek(d)).toBeDefined();
    expect(announced).toEqual([]);
  });

  // Found by review: a `replaced` end after a logout (a tab's sign-in that had noted the session
  // at /auth/login) hid the logout, and a refresh orphaned later was not revoked.
  it('keeps a revoking end noted when a later end of the same session does not revoke', async () => {
    const { registry, d } = await setUp();
    await registry.end(d, 'logout');
    await registry.end(d, 'replaced');
    expect(await registry.endedWithRevocation(d)).toBe(true);
  });

  it('leaves the note of a revoking end even without a record, in the same step', async () => {
    const { redis, keys, registry, d } = await setUp();
    const pending = digest('a sign-in not saved yet');
    expect(await registry.end(pending, 'provider-logout')).toBeUndefined();
    expect(await redis.get(keys.endedSession(pending))).toBe('provider-logout');
    expect(await registry.endedWithRevocation(pending)).toBe(true);
    // Noted, but not as revoking, for an end that revokes nothing (a new sign-in replaced it).
    expect(await registry.end(d, 'replaced')).toBeDefined();
    expect(await redis.get(keys.endedSession(d))).toBe('replaced');
    expect(await registry.endedWithRevocation(d)).toBe(false);
  });

  // Fails if, in session/records.ts WRITE_RECORD, the note is not consulted (its EXISTS line
  // removed): express-session's save at the end of a sign-in's answer brought back a session
  // that another tab's sign-in (or a back-channel logout) had just ended (found by review).
  it('never brings back an ended session with a whole-record write; a live one is written as usual', async () => {
    const { records, registry, d } = await setUp();
    const stored = await records.peek(d);
    if (!stored) throw new Error('no record');
    await registry.end(d, 'replaced');
    await records.write(d, stored);
    expect(await records.peek(d)).toBeUndefined();
    const live = digest('another session');
    await records.write(live, stored);
    expect(await records.peek(live)).toBeDefined();
  });
});

// Fails if registry.end waits for afterEnd again (`void options.afterEnd?.(...)` → `await ...`):
// a replica that never acknowledged held every end for its WAIT, one after another for a
// back-channel logout of many sessions (found by review: 6 sessions, 3.4 s).
it('hands each end to afterEnd (not a re-applied one) without waiting for it', async () => {
  const { redis, keys, records, outbox, d } = await setUp();
  const handed: string[] = [];
  const registry = createSessionRegistry({
    keys,
    idleTimeoutSeconds: 600,
    absoluteTimeoutSeconds: 3600,
    redis,
    records,
    outbox,
    afterEnd: (digestOf, reason, revokes) => {
      handed.push(`${digestOf} ${reason} ${revokes}`);
      return new Promise<void>(() => undefined);
    },
  });
  expect((await registry.end(d, 'logout'))?.auth?.sub).toBe('alice');
  await registry.end(d, 'logout', { again: true });
  expect(handed).toEqual([`${d} logout true`]);
});

describe('registry.end and the revocation journal', () => {
  /** A registry whose journal's commands fail while `journal.failure` is set (the rest work). */
  async function withJournal() {
    const { redis: failing, raw, state: journal } = failingRedis();
    const keys = createKeys(`journal${randomBytes(4).toString('hex')}:`);
    const base = { keys, idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600 };
    const sealer = createSealer([randomBytes(32).toString('base64')]);
    const records = createSessionRecords({ ...base, redis: raw, sealer });
    const outbox = createRevocationOutbox({ redis: failing, keys, sealer, leaseMs: 60_000, keptMs: 600_000 });
    const journalErrors: unknown[] = [];
    const registry = createSessionRegistry({ ...base, redis: raw, records, outbox, onJournalError: (err) => journalErrors.push(err) });
    const auth: AuthData = { handle: 'h', sub: 'alice', iss: 'https://idp.example', claims: {}, scopes: ['openid'], createdAt: Date.now() };
    const d = digest(randomBytes(16).toString('hex'));
    await records.write(d, { tokens: { v: 1, sealed: 'v1.k.iv.ct' }, auth, cookie: { path: '/' } });
    return { raw, keys, journal, journalErrors, registry, d };
  }

  // Found by review: the set is one key, on one Cluster shard; its outage failed every logout,
  // DELETE and back-channel logout of the deployment. Fails if the enlist's failure is rethrown
  // (`.catch((err: unknown) => options.onJournalError?.(err))` removed from the enlist).
  it('ends the session when the journal cannot be written, keeping the copy, and says so', async () => {
    const { raw, keys, journal, journalErrors, registry, d } = await withJournal();
    journal.failure = new Error('CLUSTERDOWN The cluster is down');
    expect((await registry.end(d, 'revoked'))?.auth?.sub).toBe('alice');
    expect(await raw.exists(keys.session(d))).toBe(0);
    expect(await raw.exists(keys.takenRecord(d))).toBe(1);
    expect(journalErrors.length).toBeGreaterThanOrEqual(1);
  });

  // Found by review: such entries were left to the sweeps, which crowded out the owed ones.
  // Fails if end() leaves them (`: outbox.dropUncopied(sessionDigest)` → `: Promise.resolve()`).
  it('leaves no entry for an end that took nothing, and keeps the entry of one whose copy is kept', async () => {
    const { raw, keys, registry, d } = await withJournal();
    const gone = digest('a session that expired');
    expect(await registry.end(gone, 'provider-logout')).toBeUndefined();
    expect(await raw.zscore(keys.revocationOutbox(), gone)).toBeNull();
    // The first end took the record and owes its revocation; a second end of it takes nothing.
    expect(await registry.end(d, 'revoked')).toBeDefined();
    expect(await registry.end(d, 'provider-logout')).toBeUndefined();
    expect(await raw.zscore(keys.revocationOutbox(), d)).not.toBeNull();
  });

  // Found by red team: a take later than the lease (a stalled link or event loop) let another
  // process's sweep claim the entry, find no copy yet, and drop it; the copy kept after it was
  // owed by no one, and the owner's one failed try was the last. Fails if end() does not enlist
  // again once the copy is kept (`stored ? outbox.enlist(sessionDigest)` → `stored ? Promise.resolve()`).
  it('owes an end whose take came after a sweep found no copy and dropped the entry', async () => {
    const raw = createMemoryRedis();
    opened.push(raw);
    const keys = createKeys(`journal${randomBytes(4).toString('hex')}:`);
    const base = { keys, idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600 };
    const sealer = createSealer([randomBytes(32).toString('base64')]);
    const records = createSessionRecords({ ...base, redis: raw, sealer });
    let letTakeGo: () => void = () => undefined;
    const takeMayGo = new Promise<void>((resolve) => (letTakeGo = resolve));
    const slowTake: typeof records = { ...records, take: async (...args) => takeMayGo.then(() => records.take(...args)) };
    const outbox = createRevocationOutbox({ redis: raw, keys, sealer, leaseMs: 60_000, keptMs: 600_000 });
    const registry = createSessionRegistry({ ...base, redis: raw, records: slowTake, outbox });
    const d = digest(randomBytes(16).toString('hex'));
    await records.write(d, { tokens: { v: 1, sealed: 'v1.k.iv.ct' }, cookie: { path: '/' } });

    const ending = registry.end(d, 'revoked');
    // Another process, whose lease has lapsed on the entry (0 ms here), sweeps while the take waits.
    const sweeper = createRevocationOutbox({ redis: raw, keys, sealer, leaseMs: 0, keptMs: 600_000 });
    const due = await eventually('the entry to be enlisted and claimed', 2_000, async () => (await sweeper.claimDue()).due.find((x) => x.digest === d));
    expect(due.kept).toBe(false);
    await sweeper.forget(due);
    expect(await raw.zscore(keys.revocationOutbox(), d)).toBeNull();
    letTakeGo();
    expect(await ending).toBeDefined();
    expect(await raw.exists(keys.takenRecord(d))).toBe(1);
    expect(await raw.zscore(keys.revocationOutbox(), d)).not.toBeNull();
  });

  // Found by review: the demo's Lua (fengari) multiplies integers in 32 bits, and `* 1000` wrapped
  // the score. Fails with `tonumber(t[1]) * 1000.0` → `tonumber(t[1]) * 1000`.
  it('scores entries by Redis time in ms on the demo\'s in-memory Redis too', async () => {
    const { raw, keys, registry, d } = await withJournal();
    await registry.end(d, 'revoked');
    const score = Number(await raw.zscore(keys.revocationOutbox(), d));
    expect(Math.abs(score - Date.now())).toBeLessThan(10_000);
  });
});
