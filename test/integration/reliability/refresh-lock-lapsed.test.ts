/**
 * A refresh whose lock lapsed while its process was away from Redis (an outage longer than the
 * lock's 15 s TTL, or that one process cut off), with a provider that detects refresh-token
 * reuse (oidc-provider revokes the whole grant when a rotated refresh token comes back).
 *
 * Process A refreshes; the provider rotates the refresh token; A loses Redis before its
 * compare-and-set and keeps the set (unsaved-refreshes.ts). Its lock lapses (deleted here, as
 * its TTL would). Process B then serves the same session, takes the free lock, and used to
 * refresh at once with the refresh token A had spent: the provider revoked the grant, the set
 * A wrote a moment later included, and the user was signed out by a Redis outage (found by red
 * team). Now A's note (`refreshing:`) makes B wait for A's set, which A writes once it is back.
 *
 * Fails if, in src/session/refresh.ts asHolder, the `awaitUnwritten` step is skipped
 * (`if (spends)` → `if (false)` before it): B refreshes with the spent token, a second grant.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { isGrant, startFrontedProvider, startProviderFront, type ProviderFront } from '../../support/provider-front.js';
import { startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { startTcpGate, type TcpGate } from '../../support/tcp-gate.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';
import { digest } from '../../../src/redis/keys.js';

const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
let redis: RedisServer;
let gate: TcpGate;
let front: ProviderFront;
let provider: TestProvider;
let upstream: Upstream;
let a: TestGateway;
let b: TestGateway;

beforeAll(async () => {
  redis = await startRedisServer();
  gate = await startTcpGate(redis.url);
  upstream = await startUpstream();
  front = await startProviderFront();
  const reserved = await reserveServer();
  provider = await startFrontedProvider(front, { clients: [gatewayClient(reserved.url)] });
  const config = buildTestConfig({
    issuer: front.url,
    publicUrl: reserved.url,
    redisUrl: redis.url,
    redis: { commandTimeoutMs: 3000 },
    routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
  });
  // A reaches Redis through the gate; B directly.
  a = await startTestGateway({ ...config, redis: { ...config.redis, url: gate.url } }, reserved, { clock });
  b = await startTestGateway(config, undefined, { clock });
});

afterAll(async () => {
  await b?.close();
  await a?.close();
  await gate?.close();
  await provider?.close();
  await front?.close();
  await upstream?.close();
  await redis?.close();
});

it("waits for the set another process got and could not write, instead of spending the same refresh token: one grant, the grant alive, the user signed in", async () => {
  const client = new BrowserClient({ timeoutMs: 15_000 });
  await signIn(client, a.url);
  const name = a.config.derived.sessionCookieName;
  const cookie = client.cookies(a.url)[name] as string;
  client.setCookie(b.url, name, cookie);
  const before = await tokensOfSession(b, cookie);
  const lock = b.runtime.keys.refreshLock(digest(sessionIdFromCookie(cookie)));

  // A refreshes; it loses Redis while the provider answers (rotating the refresh token).
  clock.advance((before?.expiresAt as number) - Math.floor(clock.now() / 1000) + 1);
  let grants = 0;
  front.intercept((req) => {
    if (isGrant(req, 'refresh_token') && ++grants === 1) gate.shut();
    return undefined;
  });
  expectErrorBody(await client.get(`${a.url}/api/echo`, { headers: csrf }), 'session_store_unavailable', 503);
  // A's lock lapses, as it would in an outage longer than its TTL.
  await b.runtime.redis.del(lock);

  // B gets the session's next call; once it holds the lock, A's path to Redis comes back.
  const onB = client.get(`${b.url}/api/echo`, { headers: csrf });
  await eventually('B to take the lapsed lock', 10_000, async () => (await b.runtime.redis.exists(lock)) === 1 || undefined);
  gate.open();
  expect((await onB).status).toBe(200);

  expect(grants).toBe(1);
  const kept = await tokensOfSession(b, cookie);
  expect(kept?.refreshToken).not.toBe(before?.refreshToken);
  expect((await provider.introspect(kept?.refreshToken as string)).active).toBe(true);
  // And the next refresh, with the token A got, works.
  front.intercept(undefined);
  clock.advance((kept?.expiresAt as number) - Math.floor(clock.now() / 1000) + 1);
  expect((await client.get(`${b.url}/api/echo`, { headers: csrf })).status).toBe(200);
  expect((await tokensOfSession(b, cookie))?.refreshToken).not.toBe(kept?.refreshToken);
}, 60_000);
