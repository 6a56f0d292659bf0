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
import { createRefreshCoordinator, type RefreshFn } from '../../../src/session/refresh.js';
import type { TokenSet } from '../../../src/session/tokens.js';
import { createTokenVault } from '../../../src/session/vault.js';
import { redisUrlForTests } from '../../support/redis-server.js';

const keys = createKeys(`t${randomBytes(4).toString('hex')}:`);
const sealer = createSealer([randomBytes(32).toString('base64')]);
const vault = createTokenVault(sealer);
const clients: Redis[] = [];

function process_(endSession: (d: string) => Promise<void> = async () => undefined) {
  const redis = new Redis(redisUrlForTests(), { lazyConnect: false, maxRetriesPerRequest: 1 });
  clients.push(redis);
  const records = createSessionRecords({ redis, keys, sealer, idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600 });
  return {
    records,
    coordinator: createRefreshCoordinator({ redis, keys, records, vault, endSession, pollIntervalMs: 10 }),
  };
}

afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit()));
});

async function newSession(records: ReturnType<typeof process_>['records'], tokens: TokenSet) {
  const d = digest(randomBytes(16).toString('hex'));
  await records.write(d, { tokens: { v: 1, sealed: vault.seal(d, tokens) }, auth: undefined });
  return d;
}

const initial: TokenSet = { accessToken: 'at-0', refreshToken: 'rt-0', expiresAt: 1 };

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
