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

/** The memory Redis, whose commands fail with `failure` while it is set. */
function failingRedis() {
  const raw = createMemoryRedis();
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

/** The outbox's commands fail with the rest when `journalFails`; by default only the removal's do. */
async function setUp(journalFails = false) {
  const { redis, raw, state } = failingRedis();
  const keys = createKeys('registry-end:');
  const base = { keys, idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600 };
  const sealer = createSealer([randomBytes(32).toString('base64')]);
  const records = createSessionRecords({ ...base, redis, sealer });
  const outbox = createRevocationOutbox({ redis: journalFails ? redis : raw, keys, sealer, leaseMs: 60_000, keptMs: 600_000 });
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

  // The revocation is journaled before the take, and a journal entry that timed out took nothing.
  it('does not announce an end whose journal entry failed: it never sent the removal', async () => {
    const { state, records, registry, announced, d } = await setUp(true);
    state.failure = new Error('Command timed out');
    await expect(registry.end(d, 'revoked')).rejects.toThrow('Command timed out');
    state.failure = undefined;
    expect(await records.peek(d)).toBeDefined();
    expect(announced).toEqual([]);
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
