/**
 * Session records against a real Redis: the proxy path's read (view) and the write coalescing
 * it relies on, including with Redis stopped (SIGSTOP).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createSealer } from '../../../src/crypto/seal.js';
import { createRedis, createWriteCoalescer, connectRedis, closeRedis } from '../../../src/redis/client.js';
import { createKeys, digest } from '../../../src/redis/keys.js';
import { createSessionRecords, UNREADABLE_VIEW, type SessionRecords } from '../../../src/session/records.js';
import type { AuthData } from '../../../src/session/data.js';
import { startRedisServer, type RedisServer } from '../../support/redis-server.js';

const sealer = createSealer([randomBytes(32).toString('base64')]);
const keys = createKeys(`t${randomBytes(4).toString('hex')}:`);
const auth: AuthData = { handle: 'h1', sub: 'alice', iss: 'https://idp.example', claims: { name: 'Alice' }, scopes: ['openid', 'api'], createdAt: Date.now() };

let server: RedisServer;
let redis: Redis;
let now = Date.now();
let records: SessionRecords;

beforeAll(async () => {
  server = await startRedisServer();
  // Generous: only the stalled-Redis test needs commands to fail, and it judges by bytes on the
  // wire, not by how fast they fail (1 s timed out once on a loaded machine).
  redis = createRedis({ url: server.url, commandTimeoutMs: 3000, keyPrefix: 'x:' }) as Redis;
  await connectRedis(redis, 5000);
  records = createSessionRecords({ redis, keys, sealer, idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600, clock: () => now });
});

afterAll(async () => {
  await closeRedis(redis);
  await server.stop();
});

async function newSession() {
  const d = digest(randomBytes(16).toString('hex'));
  await records.write(d, { tokens: { v: 1, sealed: 'v1.k.iv.ct1' }, auth, cookie: { path: '/' } });
  return d;
}

describe('the proxy path read (view)', () => {
  it('returns the auth data and tokens, frozen, and the same view while the stored value is unchanged', async () => {
    const d = await newSession();
    const first = await records.view(d);
    expect(first).toEqual({ auth, tokens: { v: 1, sealed: 'v1.k.iv.ct1' } });
    expect(Object.isFrozen(first)).toBe(true);
    expect(Object.isFrozen(first?.auth)).toBe(true);
    expect(Object.isFrozen(first?.auth?.scopes)).toBe(true);
    expect(await records.view(d)).toBe(first);
  });

  it('slides the idle TTL like load()', async () => {
    const d = await newSession();
    await redis.expire(keys.session(d), 5);
    await records.view(d);
    expect(await redis.ttl(keys.session(d))).toBeGreaterThan(500);
  });

  it('sees a new token set, dropped tokens and a deleted session at once', async () => {
    const d = await newSession();
    await records.view(d);
    expect(await records.casTokens(d, 1, { v: 2, sealed: 'v1.k.iv.ct2' })).toBe('written');
    expect((await records.view(d))?.tokens).toEqual({ v: 2, sealed: 'v1.k.iv.ct2' });
    expect(await records.casTokens(d, 2, { v: 3, sealed: '' })).toBe('written');
    expect(await records.view(d)).toEqual({ auth, tokens: undefined });
    await records.remove(d);
    expect(await records.view(d)).toBeUndefined();
  });

  it('ends a session past its absolute timeout even when its view is remembered', async () => {
    const d = await newSession();
    expect((await records.view(d))?.auth?.sub).toBe('alice');
    const saved = now;
    now = auth.createdAt + 3600 * 1000;
    try {
      expect(await records.view(d)).toBeUndefined();
      expect(await redis.exists(keys.session(d))).toBe(0);
    } finally {
      now = saved;
    }
  });

  it('reads a value it cannot parse as no sign-in (a view that is there but unreadable)', async () => {
    const d = digest('junk');
    await redis.set(keys.session(d), '{"tv":1,"tok":"x",}');
    expect(await records.view(d)).toBe(UNREADABLE_VIEW);
    expect(await records.load(d)).toBeUndefined();
  });
});

describe('the sealed auth part', () => {
  it('is opened once per stored value: a second view of the same bytes is the very same object', async () => {
    const d = await newSession();
    const text = (await redis.get(keys.session(d))) as string;
    expect(text).not.toContain('alice');
    const first = await records.view(d);
    expect(first?.auth?.sub).toBe('alice');
    expect(await records.view(d)).toBe(first);
  });

  it('reads as no sign-in through every reader once it no longer verifies, and the record is kept', async () => {
    const d = await newSession();
    expect((await records.view(d))?.auth?.sub).toBe('alice');
    const stored = JSON.parse((await redis.get(keys.session(d))) as string) as Record<string, unknown>;
    const { tv, tok, ...rest } = stored;
    await redis.set(keys.session(d), JSON.stringify({ tv, tok, ...rest, auth: { ...auth, scopes: ['openid', 'api', 'admin'] } }), 'KEEPTTL');
    // There, but unreadable (its cookie is the browser's own, dead: cleared at the next call).
    expect(await records.view(d)).toBe(UNREADABLE_VIEW);
    expect(await records.load(d)).toBeUndefined();
    expect(await records.peek(d)).toBeUndefined();
    expect(await records.peekTokens(d)).toBeUndefined();
    expect(await redis.exists(keys.session(d))).toBe(1);
  });
});

describe('write coalescing', () => {
  it('holds the socket until the loop turn ends, then sends every command', async () => {
    const hold = createWriteCoalescer(redis);
    hold();
    hold();
    expect(redis.stream.writableCorked).toBe(1);
    const replies = Promise.all(Array.from({ length: 20 }, (_, i) => redis.echo(`m${i}`)));
    await new Promise((r) => setImmediate(r));
    expect(redis.stream.writableCorked).toBe(0);
    expect(await replies).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`));
  });

  it('lets 200 reads issued in one turn all answer', async () => {
    const d = await newSession();
    const views = await Promise.all(Array.from({ length: 200 }, () => records.view(d)));
    expect(views.every((v) => v?.auth?.sub === 'alice')).toBe(true);
  });

  it('never makes a later turn wait for an earlier one while Redis is stopped', async () => {
    // ioredis's auto-pipelining sends a batch only once the previous one answered, so with Redis
    // stopped a second batch would sit unsent behind the first and fail only after two
    // timeouts. Here each turn's commands go on the wire in that turn, and each fails after its
    // own timeout. Judged by what was written to the socket, not by wall-clock margins.
    // Mutation check: `enableAutoPipelining: true` in src/redis/client.ts createRedis fails it.
    const d = await newSession();
    server.pause();
    try {
      const first = records.view(d).then(
        () => 'answered',
        () => 'failed',
      );
      await new Promise((r) => setImmediate(r));
      const writtenAfterFirst = redis.stream.bytesWritten;
      const second = records.view(d).then(
        () => 'answered',
        () => 'failed',
      );
      await new Promise((r) => setImmediate(r));
      expect(redis.stream.bytesWritten).toBeGreaterThan(writtenAfterFirst);
      expect(await Promise.all([first, second])).toEqual(['failed', 'failed']);
    } finally {
      server.resume();
    }
  });
});
