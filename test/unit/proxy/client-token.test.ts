/**
 * Client-credentials tokens after an upstream refused one: replaced only while the refused
 * token is still the current one, once per cooldown, by one process for all. The provider is a
 * counting stub; Redis is the in-process emulation (two "processes" are two caches on it).
 */
import { randomBytes } from 'node:crypto';
import { createSealer } from '../../../src/crypto/seal.js';
import { GatewayError } from '../../../src/errors.js';
import { createClientTokens, type ClientTokenOptions, type ClientTokens } from '../../../src/proxy/client-token.js';
import { GRANT_RETRY_MS } from '../../../src/proxy/grant-backoff.js';
import { createKeys } from '../../../src/redis/keys.js';
import { createMemoryRedis } from '../../../src/redis/memory.js';
import type { RedisClient } from '../../../src/redis/client.js';

const request = { scopes: ['reports:read'], resource: 'https://reports.example' };
let redis: RedisClient;
let issued: number;
let options: ClientTokenOptions;

beforeEach(async () => {
  redis = createMemoryRedis();
  await redis.flushall();
  issued = 0;
  options = {
    redis,
    keys: createKeys('cc-test:'),
    sealer: createSealer([randomBytes(32).toString('base64')]),
    fetch: () => Promise.resolve({ accessToken: `token-${++issued}`, expiresAt: Math.floor(Date.now() / 1000) + 3600 }),
    skewSeconds: 30,
    clock: Date.now,
  };
});

afterEach(() => {
  redis.disconnect();
});

const instance = (): ClientTokens => createClientTokens(options);

describe('client tokens after a refusal', () => {
  it('replaces the current token once, then passes while the cooldown lasts', async () => {
    const tokens = instance();
    expect(await tokens.get(request)).toBe('token-1');
    expect(await tokens.renew(request, 'token-1')).toBe('token-2');
    expect(await tokens.get(request)).toBe('token-2');
    // The new token is refused too: no new grant, the upstream's answer is passed through.
    expect(await tokens.renew(request, 'token-2')).toBeUndefined();
    expect(issued).toBe(2);
  });

  it('hands a token another process already replaced to a process still holding the refused one', async () => {
    const [one, two] = [instance(), instance()];
    expect(await one.get(request)).toBe('token-1');
    expect(await two.get(request)).toBe('token-1');
    expect(await one.renew(request, 'token-1')).toBe('token-2');
    expect(await two.renew(request, 'token-1')).toBe('token-2');
    expect(issued).toBe(2);
  });

  it('makes one grant for concurrent refusals of one token on two processes', async () => {
    const [one, two] = [instance(), instance()];
    await one.get(request);
    const renewed = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? one : two).renew(request, 'token-1')));
    expect(renewed).toEqual(Array(10).fill('token-2'));
    expect(issued).toBe(2);
  });

  it('leaves the shared token in place while its replacement is fetched', async () => {
    const [one, two] = [instance(), instance()];
    await one.get(request);
    let release: () => void = () => undefined;
    let fetching: () => void = () => undefined;
    const fetchStarted = new Promise<void>((resolve) => (fetching = resolve));
    const slow = options.fetch;
    options.fetch = (r) => {
      fetching();
      return new Promise<void>((resolve) => (release = resolve)).then(() => slow(r));
    };
    const renewal = instance().renew(request, 'token-1');
    await fetchStarted;
    // Another process asking meanwhile gets the cached token, instead of waiting for a grant.
    const meanwhile = await two.get(request);
    release();
    expect(await renewal).toBe('token-2');
    expect(meanwhile).toBe('token-1');
  });

  it('gives every cache key its own cooldown', async () => {
    const tokens = instance();
    await tokens.get(request);
    await tokens.renew(request, 'token-1');
    expect(await tokens.renew(request, 'token-2')).toBeUndefined();
    const other = { scopes: ['other:read'] };
    expect(await tokens.get(other)).toBe('token-3');
    expect(await tokens.renew(other, 'token-3')).toBe('token-4');
  });
});

describe('client tokens while the provider fails the grant', () => {
  let now: number;
  let failing: boolean;
  let asked: number;

  beforeEach(() => {
    now = Date.UTC(2026, 10, 25);
    failing = true;
    asked = 0;
    options.clock = () => now;
    options.fetch = () => {
      asked++;
      if (failing) return Promise.reject(new Error('provider down'));
      return Promise.resolve({ accessToken: `token-${++issued}`, expiresAt: Math.floor(now / 1000) + 3600 });
    };
  });

  const retryAfterOf = async (pending: Promise<unknown>): Promise<string | undefined> => {
    const err = await pending.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe('token_refresh_failed');
    return (err as GatewayError).headers['Retry-After'];
  };

  // Fails if, in src/proxy/client-token.ts obtain, the backoff is not consulted
  // (`if (failed)` → `if (false)`): every call asked the provider.
  it('asks again only once the backoff has passed, doubling it while the failures go on; calls meanwhile fail at once', async () => {
    const tokens = instance();
    expect(await retryAfterOf(tokens.get(request))).toBe('1');
    expect(await retryAfterOf(tokens.get(request))).toBe('1');
    expect(asked).toBe(1);
    now += 1_000;
    expect(await retryAfterOf(tokens.get(request))).toBe('2');
    now += 1_000;
    expect(await retryAfterOf(tokens.get(request))).toBe('1');
    expect(asked).toBe(2);
    for (let i = 0; i < 10; i++) {
      now += GRANT_RETRY_MS.max;
      await retryAfterOf(tokens.get(request));
    }
    expect(asked).toBe(12);
    expect(await retryAfterOf(tokens.get(request))).toBe(String(GRANT_RETRY_MS.max / 1000));
    failing = false;
    now += GRANT_RETRY_MS.max;
    expect(await tokens.get(request)).toBe('token-1');
    // Success resets the backoff: the next failure waits the first interval again.
    failing = true;
    now += 3600_000;
    expect(await retryAfterOf(tokens.get(request))).toBe('1');
  });

  // Fails if, in obtain, the failed grant is not answered with the token of this process that
  // has not expired (`if (!serving) throw err;` → `throw err;`).
  it('serves a token only due for renewal until it expires, asking the provider once per backoff', async () => {
    failing = false;
    const tokens = instance();
    expect(await tokens.get(request)).toBe('token-1');
    failing = true;
    now += (3600 - 20) * 1000; // inside the 30 s skew: due, not expired
    expect(await tokens.get(request)).toBe('token-1');
    expect(await tokens.get(request)).toBe('token-1');
    expect(asked).toBe(2);
    now += 21_000;
    expect(await retryAfterOf(tokens.get(request))).toBeDefined();
  });

  it('takes the token another process obtained, during its own backoff', async () => {
    const [one, two] = [instance(), instance()];
    await retryAfterOf(one.get(request));
    failing = false;
    expect(await two.get(request)).toBe('token-1');
    expect(await one.get(request)).toBe('token-1');
    expect(asked).toBe(2);
  });
});
