/**
 * The single-flight refresh against a real Redis. Two coordinators, each with its own Redis
 * connection, stand in for two gateway processes; the provider call is a counting function.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createSealer } from '../../../src/crypto/seal.js';
import { GatewayError } from '../../../src/errors.js';
import { createKeys, digest } from '../../../src/redis/keys.js';
import { createSessionRecords } from '../../../src/session/records.js';
import { isSessionGone } from '../../../src/session/gone.js';
import { createRefreshCoordinator, type RefreshCoordinatorOptions, type RefreshFn } from '../../../src/session/refresh.js';
import type { TokenSet } from '../../../src/session/tokens.js';
import { createTokenVault } from '../../../src/session/vault.js';
import { redisUrlForTests } from '../../support/redis-server.js';
import { eventually } from '../../support/wait.js';

const keys = createKeys(`t${randomBytes(4).toString('hex')}:`);
const sealer = createSealer([randomBytes(32).toString('base64')]);
const vault = createTokenVault(sealer);
const clients: Redis[] = [];

type Tuning = Partial<Pick<RefreshCoordinatorOptions, 'lockTtlMs' | 'unsavedRetryMs' | 'closeWaitMs' | 'onOrphaned' | 'onGivenUp' | 'maxWaitMs'>>;

/**
 * One gateway process. `casFails`: its compare-and-set of a new token set fails as a Redis
 * outage would while it answers true (the fault at the seam; reads and the lock still work).
 */
function process_(endSession: (d: string) => Promise<void> = async () => undefined, tuning: Tuning = {}, casFails?: () => boolean) {
  const redis = new Redis(redisUrlForTests(), { lazyConnect: false, maxRetriesPerRequest: 1 });
  clients.push(redis);
  const records = createSessionRecords({ redis, keys, sealer, idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600 });
  const flaky: typeof records = {
    ...records,
    casTokens: (...args) => (casFails?.() ? Promise.reject(new Error('Connection is closed.')) : records.casTokens(...args)),
  };
  const coordinator = createRefreshCoordinator({ redis, keys, records: flaky, vault, endSession, pollIntervalMs: 10, ...tuning });
  closers.push(() => coordinator.close());
  return { redis, records, coordinator };
}
const closers: Array<() => void> = [];

/** A provider that rotates refresh tokens: a spent one is refused (invalid_grant → login_required). */
function rotatingProvider() {
  const provider = { calls: 0, valid: 'rt-0' };
  const refresh: RefreshFn = async (current) => {
    provider.calls += 1;
    if (current.refreshToken !== provider.valid) throw new GatewayError('login_required');
    provider.valid = `rt-${provider.calls}`;
    return { accessToken: `at-${provider.calls}`, refreshToken: provider.valid, expiresAt: 9_999_999_999 };
  };
  return { provider, refresh };
}

afterAll(async () => {
  closers.forEach((close) => close());
  await Promise.all(clients.map((c) => c.quit()));
});

async function newSession(records: ReturnType<typeof process_>['records'], tokens: TokenSet) {
  const d = digest(randomBytes(16).toString('hex'));
  await records.write(d, { tokens: { v: 1, sealed: vault.seal(d, tokens) }, auth: undefined });
  return d;
}

const initial: TokenSet = { accessToken: 'at-0', refreshToken: 'rt-0', expiresAt: 1 };

describe('a caller whose token still serves, while another process holds the lock', () => {
  // Fails if, in src/session/refresh.ts refresh, the in-flight key leaves out whether the caller
  // may be served `seen` (`:usable`): a caller whose token the upstream refused (no stillUsable)
  // joined one that may, and was handed the refused token's set back at once.
  it('gets `seen` back at once; a caller that may not, in the same process, waits for the holder', async () => {
    const { redis, records, coordinator } = process_(undefined, { maxWaitMs: 300 });
    const tokens: TokenSet = { accessToken: 'at-0', refreshToken: 'rt-0', expiresAt: 1 };
    const d = await newSession(records, tokens);
    await redis.set(keys.refreshLock(d), 'another process', 'PX', 15_000);
    const { refresh } = rotatingProvider();
    const seen = { version: 1, tokens };
    const usable = coordinator.refresh(d, seen, refresh, { stillUsable: () => true });
    const refused = coordinator.refresh(d, seen, refresh, {});
    await expect(usable).resolves.toBe(seen);
    await expect(refused).rejects.toMatchObject({ code: 'token_refresh_failed' });
    await redis.del(keys.refreshLock(d));
  });
});

describe('close', () => {
  // Fails if, in session/refresh.ts close, the bound goes (`Promise.race([...])` becomes
  // `await Promise.allSettled([...inFlight.values()])`): close then waited for a provider that
  // never answers, and the process never exited.
  it('waits for a refresh under way, but no longer than closeWaitMs when the provider never answers', async () => {
    const a = process_(undefined, { closeWaitMs: 200 });
    const d = await newSession(a.records, initial);
    const refresh: RefreshFn = () => new Promise<TokenSet>(() => undefined);
    void a.coordinator.refresh(d, { version: 1, tokens: initial }, refresh).catch(() => undefined);
    await new Promise((resolve) => setImmediate(resolve));
    expect(a.coordinator.refreshing).toBe(1);
    await expect(a.coordinator.close()).resolves.toBeUndefined();
  }, 10_000);
});

describe('a set kept for Redis that Redis never takes', () => {
  // Fails if, in session/refresh.ts, the kept set loses its session's handle
  // (`unsaved.keep(digest, seen.version, next, held.lock, context.handle)` → `..., undefined)`):
  // the error line `refresh_set_given_up` then named no session, and the operator could not tell
  // which user will be signed out at the next refresh.
  it('is given up at close naming the public handle of its session', async () => {
    const givenUp: Array<string | undefined> = [];
    const a = process_(undefined, { closeWaitMs: 0, onGivenUp: (handle) => givenUp.push(handle) }, () => true);
    const { refresh } = rotatingProvider();
    const d = await newSession(a.records, initial);
    await expect(a.coordinator.refresh(d, { version: 1, tokens: initial }, refresh, { handle: 'h-given-up' })).rejects.toBeDefined();
    expect(a.coordinator.unsaved.size).toBe(1);
    await a.coordinator.close();
    expect(givenUp).toEqual(['h-given-up']);
  });
});

describe('a set kept for Redis whose session ends meanwhile', () => {
  // Fails if, in session/unsaved-refreshes.ts attempt, `if (result === 'missing') options.onOrphaned?.(...)`
  // is removed: the set, which holds the only valid refresh token, was dropped without a word
  // (and so never revoked after a logout).
  it('is reported as orphaned once its write finds the session gone', async () => {
    let failing = true;
    const orphaned: Array<{ digest: string; refreshToken: string | undefined }> = [];
    const a = process_(undefined, { unsavedRetryMs: 20, onOrphaned: (d, tokens) => orphaned.push({ digest: d, refreshToken: tokens.refreshToken }) }, () => failing);
    const { refresh } = rotatingProvider();
    const d = await newSession(a.records, initial);
    await expect(a.coordinator.refresh(d, { version: 1, tokens: initial }, refresh)).rejects.toBeDefined();
    expect(a.coordinator.unsaved.size).toBe(1);
    await a.records.remove(d);
    failing = false;
    await eventually('the kept set to be reported', 5_000, () => orphaned.length > 0 || undefined);
    expect(orphaned).toEqual([{ digest: d, refreshToken: 'rt-1' }]);
    expect(a.coordinator.unsaved.size).toBe(0);
  });
});

describe('a refresh the provider refuses right after another process refreshed through a Redis outage', () => {
  // Fails if, in session/refresh.ts asHolder, the refused refresh's re-read is a single
  // `readLatest` again (no `newerWithin(..., invalidGrantGraceMs)`): the session was ended,
  // though the other process wrote the set holding the valid refresh token a moment later.
  it('waits for the set the other process still holds, and ends nothing', async () => {
    let failing = true;
    const ended: string[] = [];
    const { provider, refresh } = rotatingProvider();
    const a = process_(undefined, { unsavedRetryMs: 250 }, () => failing);
    const b = process_(async (d) => void ended.push(d), { unsavedRetryMs: 250 });
    const d = await newSession(a.records, initial);
    // A refreshes (rt-0 spent, rt-1 issued) but cannot write: it keeps the set and retries.
    await expect(a.coordinator.refresh(d, { version: 1, tokens: initial }, refresh)).rejects.toBeDefined();
    expect(a.coordinator.unsaved.size).toBe(1);
    // The outage outlasted the lock: it lapsed. B takes over with the spent token, and Redis
    // takes writes again as the provider refuses B.
    await b.redis.del(keys.refreshLock(d));
    const refreshAfterOutage: RefreshFn = (current) => {
      failing = false;
      return refresh(current);
    };
    const got = await b.coordinator.refresh(d, { version: 1, tokens: initial }, refreshAfterOutage);
    expect(got).toMatchObject({ version: 2, tokens: { refreshToken: 'rt-1' } });
    expect(ended).toEqual([]);
    expect(provider.calls).toBe(2);
  });
});

describe('single-flight refresh across processes', () => {
  it('lets 50 concurrent requests on two processes cause exactly one provider call, all getting the new set', async () => {
    const a = process_();
    const b = process_();
    const d = await newSession(a.records, initial);
    let calls = 0;
    const refresh: RefreshFn = async (current) => {
      calls += 1;
      expect(current.refreshToken).toBe('rt-0');
      await new Promise((r) => setTimeout(r, 50));
      return { accessToken: 'at-1', refreshToken: 'rt-1', expiresAt: 9_999_999_999 };
    };
    const seen = { version: 1, tokens: initial };
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => (i % 2 ? a : b).coordinator.refresh(d, seen, refresh)),
    );
    expect(calls).toBe(1);
    expect(new Set(results.map((r) => r.tokens?.accessToken))).toEqual(new Set(['at-1']));
    expect(results.every((r) => r.version === 2)).toBe(true);

    const stored = await a.records.peekTokens(d);
    expect(stored?.v).toBe(2);
    expect(vault.open(d, stored?.sealed ?? '')?.refreshToken).toBe('rt-1');
  });

  it('returns the newer set without calling the provider when someone refreshed since the caller read', async () => {
    const a = process_();
    const d = await newSession(a.records, initial);
    await a.records.casTokens(d, 1, { v: 2, sealed: vault.seal(d, { accessToken: 'at-2', refreshToken: 'rt-2' }) });
    let calls = 0;
    const result = await a.coordinator.refresh(d, { version: 1, tokens: initial }, async () => {
      calls += 1;
      return initial;
    });
    expect(calls).toBe(0);
    expect(result.tokens?.accessToken).toBe('at-2');
  });

  // Found by review: an instance of a key roll that lacks the new key, waiting while one that has
  // it refreshed, read the newer set as no tokens (login_required), and its call cleared the
  // cookie. Fails if src/session/refresh.ts readLatest opens with `vault.open` again instead of
  // `vault.openHere`, or openHere's `sealedElsewhere(sealed)) throw sessionGone()` line is removed.
  it('refuses a newer set sealed with a key it lacks as a session ended elsewhere (its cookie kept), not as signed out', async () => {
    const a = process_();
    const d = await newSession(a.records, initial);
    const newer = createTokenVault(createSealer([randomBytes(32).toString('base64')]));
    await a.records.casTokens(d, 1, { v: 2, sealed: newer.seal(d, { accessToken: 'at-2', refreshToken: 'rt-2' }) });
    const refused = a.coordinator.refresh(d, { version: 1, tokens: initial }, async () => initial);
    await expect(refused).rejects.toMatchObject({ code: 'login_required' });
    expect(isSessionGone(await refused.catch((err: unknown) => err))).toBe(true);
    expect(await a.records.peekTokens(d)).toMatchObject({ v: 2 });
  });

  it('never lets a whole-record write put back an older token set', async () => {
    const a = process_();
    const d = await newSession(a.records, initial);
    const newer = vault.seal(d, { accessToken: 'at-9', refreshToken: 'rt-9' });
    expect(await a.records.casTokens(d, 1, { v: 2, sealed: newer })).toBe('written');
    // A slow request that loaded version 1 saves the whole session afterwards:
    await a.records.write(d, { tokens: { v: 1, sealed: vault.seal(d, initial) }, auth: undefined, extra: 'x' });
    const stored = await a.records.peek(d);
    expect(stored?.tokens.v).toBe(2);
    expect(vault.open(d, stored?.tokens.sealed ?? '')?.accessToken).toBe('at-9');
    expect(stored?.extra).toBe('x');
    expect(await a.records.casTokens(d, 1, { v: 2, sealed: newer })).toBe('stale');
  });

  it('ends the session on invalid_grant and answers login_required to every waiter', async () => {
    const ended: string[] = [];
    const a = process_(async (d) => {
      ended.push(d);
      await a.records.remove(d);
    });
    const d = await newSession(a.records, initial);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 5 }, () =>
        a.coordinator.refresh(d, { version: 1, tokens: initial }, async () => {
          throw new GatewayError('login_required');
        }),
      ),
    );
    expect(outcomes.every((o) => o.status === 'rejected' && (o.reason as GatewayError).code === 'login_required')).toBe(true);
    expect(ended).toEqual([d]);
    expect(await a.records.peek(d)).toBeUndefined();
  });

  it('tells of a set it could not write at first once it is written (onRefreshed), like any stored refresh', async () => {
    // Mutation check: in src/session/refresh.ts coordinate(), drop `options.onRefreshed?.(digest);`
    // after the kept set's flush: no instance hears of the refresh, and this fails.
    const redis = new Redis(redisUrlForTests(), { lazyConnect: false, maxRetriesPerRequest: 1 });
    clients.push(redis);
    const records = createSessionRecords({ redis, keys, sealer, idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600 });
    // The fault at the seam: the first compare-and-set fails as a Redis outage would.
    let failNext = true;
    const flaky: typeof records = {
      ...records,
      casTokens: (...args) => {
        if (!failNext) return records.casTokens(...args);
        failNext = false;
        return Promise.reject(new Error('Connection is closed.'));
      },
    };
    const refreshed: string[] = [];
    const coordinator = createRefreshCoordinator({
      redis, keys, records: flaky, vault, endSession: async () => undefined, pollIntervalMs: 10, unsavedRetryMs: 60_000,
      onRefreshed: (d) => refreshed.push(d),
    });
    const d = await newSession(records, initial);
    let calls = 0;
    const refresh: RefreshFn = async () => ({ accessToken: `at-${++calls}`, refreshToken: `rt-${calls}` });
    await expect(coordinator.refresh(d, { version: 1, tokens: initial }, refresh)).rejects.toThrow();
    expect(refreshed).toEqual([]);
    const later = await coordinator.refresh(d, { version: 1, tokens: initial }, refresh);
    expect(later.tokens?.accessToken).toBe('at-1');
    expect(calls).toBe(1);
    expect(refreshed).toEqual([d]);
    coordinator.close();
  });

  it('keeps the lock while a provider call outlasts its TTL, so no other process refreshes with the same token', async () => {
    // Staged end to end with a 300 ms lock and a 1 s provider call (the production case is a
    // ~21 s DPoP refresh with nonce retry against the 15 s TTL).
    // Fails if, in src/session/refresh.ts coordinate(), `setInterval(() => void lock.extend(), ...)`
    // becomes `setInterval(() => undefined, ...)`.
    const ended: string[] = [];
    const endSession = async (d: string) => {
      ended.push(d);
      await a.records.remove(d);
    };
    const a = process_(endSession, { lockTtlMs: 300 });
    const b = process_(endSession, { lockTtlMs: 300 });
    const d = await newSession(a.records, initial);
    const { provider, refresh } = rotatingProvider();
    // The provider rotates at once and answers a second later.
    const slow: RefreshFn = async (current) => {
      const next = await refresh(current);
      await new Promise((r) => setTimeout(r, 1000));
      return next;
    };
    const seen = { version: 1, tokens: initial };
    const onA = a.coordinator.refresh(d, seen, slow);
    await new Promise((r) => setTimeout(r, 600)); // two lock TTLs into A's provider call
    const onB = await b.coordinator.refresh(d, seen, slow);
    expect(await onA).toMatchObject({ version: 2, tokens: { refreshToken: 'rt-1' } });
    expect(onB).toMatchObject({ version: 2, tokens: { refreshToken: 'rt-1' } });
    expect(provider.calls).toBe(1);
    expect(ended).toEqual([]);
  });

  it("never hands one renewal's failure to a concurrent call of another renewal in the same process", async () => {
    // Fails if, in src/session/refresh.ts refresh(), the single-flight key drops `:${renewal}`.
    const a = process_();
    const d = await newSession(a.records, initial);
    const seen = { version: 1, tokens: initial };
    const exchange: RefreshFn = async () => {
      await new Promise((r) => setTimeout(r, 100));
      throw new GatewayError('insufficient_scope');
    };
    const { provider, refresh } = rotatingProvider();
    const [exchanged, refreshed] = await Promise.allSettled([
      a.coordinator.refresh(d, seen, exchange, { needsRefreshToken: false }),
      a.coordinator.refresh(d, seen, refresh, { needsRefreshToken: true }),
    ]);
    expect(exchanged).toMatchObject({ status: 'rejected', reason: { code: 'insufficient_scope' } });
    expect(refreshed).toMatchObject({ status: 'fulfilled', value: { version: 2, tokens: { refreshToken: 'rt-1' } } });
    expect(provider.calls).toBe(1);

    // Two resources' refreshes, told apart by the caller, do not share either.
    const e = await newSession(a.records, initial);
    const failing: RefreshFn = async () => {
      await new Promise((r) => setTimeout(r, 100));
      throw new GatewayError('token_refresh_failed');
    };
    const [one, other] = await Promise.allSettled([
      a.coordinator.refresh(e, seen, failing, { renewal: 'resource https://one' }),
      a.coordinator.refresh(e, seen, async (t) => ({ ...t, accessToken: 'at-other' }), { renewal: 'resource https://other' }),
    ]);
    expect(one).toMatchObject({ status: 'rejected', reason: { code: 'token_refresh_failed' } });
    expect(other).toMatchObject({ status: 'fulfilled', value: { version: 2, tokens: { accessToken: 'at-other' } } });
  });

  describe('a token set the provider issued but Redis did not take', () => {
    it('keeps the refresh lock, so another process waits for that set instead of refreshing with the spent token', async () => {
      // Fails if, in src/session/refresh.ts coordinate(), `await held.lock?.release();` becomes
      // `await lock.release();` (the lock is freed although the kept set has not been written).
      const ended: string[] = [];
      const endSession = async (d: string) => {
        ended.push(d);
        await b.records.remove(d);
      };
      let failed = false;
      const a = process_(endSession, { unsavedRetryMs: 300 }, () => !failed && (failed = true));
      const b = process_(endSession);
      const d = await newSession(a.records, initial);
      const { provider, refresh } = rotatingProvider();
      const seen = { version: 1, tokens: initial };

      await expect(a.coordinator.refresh(d, seen, refresh)).rejects.toMatchObject({ code: 'session_store_unavailable' });
      expect(await a.redis.pttl(keys.refreshLock(d))).toBeGreaterThan(0);
      const onB = await b.coordinator.refresh(d, seen, refresh);
      expect(onB).toMatchObject({ version: 2, tokens: { accessToken: 'at-1', refreshToken: 'rt-1' } });
      expect(provider.calls).toBe(1);
      expect(ended).toEqual([]);
      // A releases the lock once its write has answered; B may have read that write first.
      await eventually('A to release the lock', 5_000, async () => (await a.redis.exists(keys.refreshLock(d))) === 0 || undefined);
    });

    it('keeps the lock alive past its TTL while the set waits for Redis', async () => {
      // Fails if, in src/session/unsaved-refreshes.ts sweep(), `entry.lock?.extend().catch(() => undefined);`
      // is removed: the lock lapses after lockTtlMs and B refreshes with the spent token.
      const ended: string[] = [];
      const endSession = async (d: string) => {
        ended.push(d);
        await b.records.remove(d);
      };
      let redisDown = true;
      const a = process_(endSession, { lockTtlMs: 300, unsavedRetryMs: 50 }, () => redisDown);
      const b = process_(endSession, { lockTtlMs: 300 });
      const d = await newSession(a.records, initial);
      const { provider, refresh } = rotatingProvider();
      const seen = { version: 1, tokens: initial };

      await expect(a.coordinator.refresh(d, seen, refresh)).rejects.toMatchObject({ code: 'session_store_unavailable' });
      await new Promise((r) => setTimeout(r, 900)); // three lock TTLs
      expect(await a.redis.pttl(keys.refreshLock(d))).toBeGreaterThan(0);
      setTimeout(() => (redisDown = false), 300);
      const onB = await b.coordinator.refresh(d, seen, refresh);
      expect(onB).toMatchObject({ version: 2, tokens: { accessToken: 'at-1', refreshToken: 'rt-1' } });
      expect(provider.calls).toBe(1);
      expect(ended).toEqual([]);
    });

    it('does not end the session on invalid_grant when the record moved past the version the refresh started from', async () => {
      // The lock lapsed anyway (Redis down longer than its TTL) and another process's kept set
      // was written while this one's refresh, with the refresh token it spent, was at the provider.
      // Fails if, in src/session/refresh.ts asHolder, `if (moved?.tokens && moved.version > seen.version) {`
      // becomes `if (false) {`.
      const ended: string[] = [];
      const b = process_(async (d) => {
        ended.push(d);
        await b.records.remove(d);
      });
      const d = await newSession(b.records, initial);
      const kept: TokenSet = { accessToken: 'at-kept', refreshToken: 'rt-kept' };
      const result = await b.coordinator.refresh(d, { version: 1, tokens: initial }, async () => {
        await b.records.casTokens(d, 1, { v: 2, sealed: vault.seal(d, kept) });
        throw new GatewayError('login_required');
      });
      expect(result).toEqual({ version: 2, tokens: kept });
      expect(ended).toEqual([]);
      expect((await b.records.peekTokens(d))?.v).toBe(2);
    });
  });

  it('keeps the session when the provider fails, so a later request can refresh', async () => {
    const a = process_();
    const d = await newSession(a.records, initial);
    await expect(
      a.coordinator.refresh(d, { version: 1, tokens: initial }, async () => {
        throw new GatewayError('token_refresh_failed');
      }),
    ).rejects.toMatchObject({ code: 'token_refresh_failed' });
    const later = await a.coordinator.refresh(d, { version: 1, tokens: initial }, async () => ({ accessToken: 'at-ok', refreshToken: 'rt-ok' }));
    expect(later.tokens?.accessToken).toBe('at-ok');
  });
});
