/**
 * The user's session index against a real Redis (session/registry.ts): which entries list()
 * prunes, and that both forms of an entry (`pending:`digest while a sign-in's record is not
 * saved yet, the plain digest once it is) are read as the same session. Each `it` names the
 * one-line change that makes it fail.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { createSealer } from '../../../src/crypto/seal.js';
import { closeRedis, connectRedis, createRedis } from '../../../src/redis/client.js';
import { createKeys, digest } from '../../../src/redis/keys.js';
import type { AuthData } from '../../../src/session/data.js';
import { createSessionRecords } from '../../../src/session/records.js';
import { createRevocationOutbox } from '../../../src/session/revocation-outbox.js';
import { createSessionRegistry, providerSessionDigest, userDigest, type SessionRegistry } from '../../../src/session/registry.js';
import { redisUrlForTests } from '../../support/redis-server.js';
import { startRedisStall, type RedisStall } from '../../support/redis-stall.js';

const iss = 'https://idp.example';
const keys = createKeys(`idx${randomBytes(4).toString('hex')}:`);
/** list()'s prune on the wire: the PRUNE script (compare and delete), or a plain HDEL. */
const PRUNE = ["redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2]", '$4\r\nhdel\r\n'];

let stall: RedisStall;
/** The registry's connection, through the stall. */
let redis: Redis;
/** Another connection, straight to Redis. */
let direct: Redis;
let registry: SessionRegistry;
let records: ReturnType<typeof createSessionRecords>;
/** Another instance of the deployment, on the direct connection: the one a sign-in runs on. */
let other: SessionRegistry;
let otherRecords: ReturnType<typeof createSessionRecords>;

beforeAll(async () => {
  stall = await startRedisStall(redisUrlForTests());
  redis = createRedis({ url: stall.url, commandTimeoutMs: 3000, keyPrefix: 'x:' }) as Redis;
  direct = createRedis({ url: redisUrlForTests(), commandTimeoutMs: 3000, keyPrefix: 'x:' }) as Redis;
  await connectRedis(redis, 5000);
  await connectRedis(direct, 5000);
  const sealer = createSealer([randomBytes(32).toString('base64')]);
  const options = { redis, keys, idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600 };
  records = createSessionRecords({ ...options, sealer });
  const leases = { sealer, leaseMs: 60_000, keptMs: 600_000 };
  registry = createSessionRegistry({ ...options, records, outbox: createRevocationOutbox({ ...options, ...leases }) });
  const otherOptions = { ...options, redis: direct };
  otherRecords = createSessionRecords({ ...otherOptions, sealer });
  other = createSessionRegistry({ ...otherOptions, records: otherRecords, outbox: createRevocationOutbox({ ...otherOptions, ...leases }) });
});

afterAll(async () => {
  stall?.release();
  await closeRedis(redis);
  await closeRedis(direct);
  await stall?.close();
});

/** A fresh user, so that each case reads only its own index. */
function newUser(): { sub: string; userKey: string } {
  const sub = `u${randomBytes(6).toString('hex')}`;
  return { sub, userKey: keys.userSessions(userDigest(iss, sub)) };
}

function authFor(sub: string, sid?: string): AuthData {
  return { handle: randomBytes(16).toString('base64url'), sub, iss, ...(sid ? { sid } : {}), claims: {}, scopes: ['openid'], createdAt: Date.now() };
}

/** A signed-in session's record, as the callback saves it. */
async function saveRecord(auth: AuthData): Promise<string> {
  const d = digest(randomBytes(16).toString('hex'));
  await records.write(d, { tokens: { v: 1, sealed: 'v1.k.iv.ct' }, auth, cookie: { path: '/' } });
  return d;
}

const noRecord = () => digest(randomBytes(16).toString('hex'));

// Fails if, in session/user-index.ts prune (called by list()), `if (entry.saved)` is dropped from
// `if (entry.saved) await redis.eval(PRUNE, ...)` (a pending entry is then pruned too).
it('list() keeps a pending entry whose record is not saved yet (a sign-in in progress)', async () => {
  const { sub, userKey } = newUser();
  const pending = authFor(sub);
  const d = noRecord();
  await registry.register(d, pending, 'pending');

  expect(await registry.list(iss, sub)).toEqual([]);
  expect(await direct.hget(userKey, pending.handle)).toBe(`pending:${d}`);
});

// Fails if, in session/user-index.ts prune, the line
// `if (entry.saved) await redis.eval(PRUNE, 1, userKey, entry.handle, entry.value);` is removed,
// or list()'s call `await prune(redis, userKey, entry);` is.
it('list() prunes a saved-form entry whose record is gone, and one as 0.5.x wrote it', async () => {
  const { sub, userKey } = newUser();
  const gone = authFor(sub);
  await registry.register(noRecord(), gone, 'saved');
  // 0.5.x: the plain digest, which is the saved form.
  const old = authFor(sub);
  await direct.hset(userKey, old.handle, noRecord());
  const live = authFor(sub);
  const liveDigest = await saveRecord(live);
  await registry.register(liveDigest, live, 'saved');

  expect((await registry.list(iss, sub)).map((s) => s.digest)).toEqual([liveDigest]);
  expect(await direct.hkeys(userKey)).toEqual([live.handle]);
});

// Fails if, in session/user-index.ts parseIndexEntry, `digest: value.slice(PENDING.length)` becomes
// `digest: value` (the pending form is then read as a digest of its own, with no record).
it('a pending entry whose record exists (the second register failed) is listed, and ended by sub', async () => {
  const { sub, userKey } = newUser();
  const auth = authFor(sub);
  const d = await saveRecord(auth);
  await registry.register(d, auth, 'pending');

  const listed = await registry.list(iss, sub);
  expect(listed.map((s) => [s.handle, s.digest])).toEqual([[auth.handle, d]]);

  const ended = await registry.endByUser(iss, sub);
  expect(ended.map((e) => e.digest)).toEqual([d]);
  expect(await records.peek(d)).toBeUndefined();
  expect(await direct.exists(userKey)).toBe(0);
});

// Fails if, in session/user-index.ts prune (called by list()), `await redis.eval(PRUNE, 1, userKey, entry.handle, entry.value)`
// becomes `await redis.hdel(userKey, entry.handle)`.
it("list()'s prune deletes an entry only if it still holds the value read", async () => {
  const { sub, userKey } = newUser();
  const auth = authFor(sub);
  await registry.register(noRecord(), auth, 'saved');

  // The entry is rewritten between list()'s read and its prune.
  const held = stall.holdAt(PRUNE);
  const listing = registry.list(iss, sub);
  try {
    await held;
    await direct.hset(userKey, auth.handle, 'pending:rewritten');
  } finally {
    stall.release();
  }
  expect(await listing).toEqual([]);
  expect(await direct.hget(userKey, auth.handle)).toBe('pending:rewritten');
});

/** A DEL of exactly this key on the wire. */
const delOf = (key: string) => `$3\r\ndel\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n`;

/** The callback's indexing of a new session, on the other instance. */
async function signInOnOther(auth: AuthData): Promise<string> {
  const d = digest(randomBytes(16).toString('hex'));
  await other.register(d, auth, 'pending');
  await otherRecords.write(d, { tokens: { v: 1, sealed: 'v1.k.iv.ct' }, auth, cookie: { path: '/' } });
  await other.register(d, auth, 'saved');
  return d;
}

/**
 * Back-channel logout by sub ends what the index held when it read it. A sign-in indexed after
 * that read, before the end of the logout, keeps its entry: a DEL of the whole index there
 * left a working session that /auth/sessions did not show and no later logout by sub ended.
 * Staged by holding such a DEL on the wire while the sign-in runs on another instance.
 *
 * Fails if, in session/provider-logouts.ts endByUser, `await redis.del(userKey);` is put back before
 * `return ended;`.
 */
it('endByUser leaves the entry of a sign-in indexed while it ran', async () => {
  const { sub, userKey } = newUser();
  const first = authFor(sub);
  const firstDigest = await saveRecord(first);
  await registry.register(firstDigest, first, 'saved');
  const stale = authFor(sub);
  await registry.register(noRecord(), stale, 'saved');

  const held = stall.holdAt(delOf(userKey));
  const ending = registry.endByUser(iss, sub);
  let next: string;
  try {
    await Promise.race([held, ending]);
    next = await signInOnOther(authFor(sub));
  } finally {
    stall.release();
  }
  expect((await ending).map((e) => e.digest)).toEqual([firstDigest]);

  expect((await registry.list(iss, sub)).map((s) => s.digest)).toEqual([next]);
  // The stale saved-form entry went; only the new session's is left.
  expect(await direct.hvals(userKey)).toEqual([next]);
  expect((await registry.endByUser(iss, sub)).map((e) => e.digest)).toEqual([next]);
  expect(await records.peek(next)).toBeUndefined();
});

/**
 * The same for back-channel logout by sid, whose set a sign-in with that provider session joins.
 *
 * Fails if, in session/provider-logouts.ts endByProviderSession, `await redis.del(sidKey);` is put back
 * after the sessions are ended (after `endAll(await redis.smembers(sidKey))`).
 */
it('endByProviderSession leaves a sign-in of that sid indexed while it ran', async () => {
  const { sub } = newUser();
  const sid = `sid-${randomBytes(6).toString('hex')}`;
  const sidKey = keys.providerSession(providerSessionDigest(iss, sid));
  const first = authFor(sub, sid);
  const firstDigest = await saveRecord(first);
  await registry.register(firstDigest, first, 'saved');

  const held = stall.holdAt(delOf(sidKey));
  const ending = registry.endByProviderSession(iss, sid, undefined, Math.floor(Date.now() / 1000));
  let next: string;
  try {
    await Promise.race([held, ending]);
    next = await signInOnOther(authFor(sub, sid));
  } finally {
    stall.release();
  }
  expect((await ending).map((e) => e.digest)).toEqual([firstDigest]);

  expect((await registry.endByProviderSession(iss, sid, undefined, Math.floor(Date.now() / 1000))).map((e) => e.digest)).toEqual([next]);
  expect(await records.peek(next)).toBeUndefined();
  expect(await direct.exists(sidKey)).toBe(0);
});
