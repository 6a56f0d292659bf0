/**
 * Every key the gateway writes to Redis expires, on every path (found by the hygiene red team:
 * the sign-ins-in-progress set had no TTL, and a user index or provider-session set whose EXPIRE
 * never landed had none for good). A whole life is driven against a real redis-server, then every
 * key of the gateway's prefix is read for its TTL; and an index write is cut on the wire.
 *
 * Mutations that fail this file: src/session/transactions.ts LIST without its PEXPIRE, or
 * src/session/user-index.ts indexEntry as an HSET and an EXPIRE sent apart.
 */
import { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { BrowserClient } from '../../support/browser-client.js';
import { completeAtProvider, signIn, startLogin } from '../../support/drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { BACKCHANNEL_LOGOUT_EVENT, startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { redisUrlForTests, scanKeys } from '../../support/redis-server.js';
import { startRedisStall, type RedisStall } from '../../support/redis-stall.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { withTimeout } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
const alice = { user: 'alice', password: 'alice-password' };
let redis: Redis;

beforeAll(() => {
  redis = new Redis(redisUrlForTests());
});
afterAll(() => redis.disconnect());

/** TTL of every key under the prefix, by key (the prefix taken off). */
async function ttlsUnder(prefix: string): Promise<Map<string, number>> {
  const ttls = new Map<string, number>();
  for (const key of await scanKeys(redis, `${prefix}*`)) ttls.set(key.slice(prefix.length), await redis.ttl(key));
  return ttls;
}

/** The kind of a key: its name up to the first `:` or `{` (`sess`, `user`, `tx-active`, ...). */
const kindOf = (key: string) => key.replace(/[{:].*$/, '');

describe('after a whole life of every flow', () => {
  const clock = createTestClock();
  let stack: Stack;
  let upstream: Upstream;

  beforeAll(async () => {
    upstream = await startUpstream();
    stack = await startStack({
      clock,
      client: { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] },
      provider: { ttl: { AccessToken: 60 } },
      config: {
        rateLimit: { loginPerMinute: 30, maxActiveLogins: 10_000 },
        routes: [
          { path: '/api', target: upstream.url, auth: 'user' },
          { path: '/service', target: upstream.url, auth: 'client' },
        ],
      },
    });
  }, 60_000);

  afterAll(async () => {
    await stack?.close();
    await upstream?.close();
  });

  it('no key of the gateway is left without a TTL', async () => {
    const gw = stack.gateway;
    const a = new BrowserClient();
    await signIn(a, gw.url, alice);
    const calls = [(await a.get(`${gw.url}/api/echo`, { headers: csrf })).status, (await a.get(`${gw.url}/service/echo`, { headers: csrf })).status];
    // Past the access token's life: three calls at once share one refresh.
    clock.advance(120);
    calls.push(...(await Promise.all([1, 2, 3].map(() => a.get(`${gw.url}/api/echo`, { headers: csrf })))).map((r) => r.status));
    expect(calls).toEqual([200, 200, 200, 200, 200]);

    // Sign-ins abandoned at /auth/login and at the provider's page (the callback never followed).
    await startLogin(new BrowserClient(), gw.url);
    const abandoned = new BrowserClient();
    await completeAtProvider(abandoned, (await startLogin(abandoned, gw.url)).authorizeUrl, alice);

    // A second device, listed and ended from the first.
    await signIn(new BrowserClient(), gw.url, alice);
    const listed = (await a.get(`${gw.url}/auth/sessions`, { headers: csrf })).json<Array<{ id: string; current: boolean }>>();
    const other = listed.find((s) => !s.current);
    expect(other).toBeDefined();
    expect((await a.request('DELETE', `${gw.url}/auth/sessions/${other?.id}`, { headers: csrf })).status).toBe(204);

    // Back-channel logouts: by sub, an unknown sid and sub, and one token twice.
    await signIn(new BrowserClient(), gw.url, { user: 'bob', password: 'bob-password' });
    const logout = async (token: string) => (await new BrowserClient().post(`${gw.url}/auth/backchannel-logout`, { form: { logout_token: token } })).status;
    const sign = (claims: Record<string, unknown>) => stack.provider.signLogoutToken({ events: { [BACKCHANNEL_LOGOUT_EVENT]: {} }, ...claims });
    const replayed = await sign({ sub: 'carol' });
    const logouts = [
      await logout(await sign({ sub: 'bob' })),
      await logout(await sign({ sid: `unknown-${randomBytes(6).toString('hex')}` })),
      await logout(await sign({ sub: `nobody-${randomBytes(6).toString('hex')}` })),
      await logout(replayed),
      await logout(replayed),
    ];
    expect(logouts).toEqual([200, 200, 200, 200, 400]);

    // One session that lives on, with its index entries.
    await signIn(new BrowserClient(), gw.url, alice);
    // The login rate limit, spent.
    for (let i = 0; i < 32; i++) await new BrowserClient().get(`${gw.url}/auth/login`);
    expect((await a.post(`${gw.url}/auth/logout`, { headers: csrf })).status).toBe(200);

    const ttls = await ttlsUnder(stack.config.redis.keyPrefix);
    const kinds = new Set([...ttls.keys()].map(kindOf));
    // The flows above wrote what they should have: otherwise the sweep proves nothing.
    for (const kind of ['sess', 'user', 'sid', 'tx-active', 'tx', 'ended-sess', 'sid-out', 'jti', 'rl', 'cc']) expect(kinds).toContain(kind);
    expect([...ttls].filter(([, ttl]) => ttl < 0)).toEqual([]);
  }, 120_000);
});

describe('a user-index write cut on the wire', () => {
  let provider: TestProvider;
  let gateway: TestGateway;
  let stall: RedisStall;

  beforeAll(async () => {
    stall = await startRedisStall(redisUrlForTests());
    const reserved = await reserveServer();
    provider = await startTestProvider({ clients: [gatewayClient(reserved.url)] });
    const config = buildTestConfig({ issuer: provider.issuer, publicUrl: reserved.url, redisUrl: stall.url, redis: { commandTimeoutMs: 500 } });
    gateway = await startTestGateway(config, reserved);
  }, 60_000);

  afterAll(async () => {
    await gateway?.close();
    await stall?.close();
    await provider?.close();
  });

  it('leaves no index key without a TTL (the member and its expiry land together or not at all)', async () => {
    const client = new BrowserClient({ timeoutMs: 15_000 });
    const callbackUrl = await completeAtProvider(client, (await startLogin(client, gateway.url)).authorizeUrl, alice);
    // The callback's first index write: an EXPIRE sent on its own, or a script that calls it.
    const held = stall.holdAt(['$6\r\nexpire\r\n', "'EXPIRE'"]);
    const answer = client.get(callbackUrl);
    await withTimeout(held, 10_000, 'the index write held');
    expect((await answer).status).toBe(503);
    // What was held never reaches Redis: the link is cut, as a dropped connection or a killed process.
    await stall.close();
    const ttls = await ttlsUnder(gateway.config.redis.keyPrefix);
    const indexes = [...ttls].filter(([key]) => ['user', 'sid'].includes(kindOf(key)));
    expect(indexes.filter(([, ttl]) => ttl < 0)).toEqual([]);
  });
});
