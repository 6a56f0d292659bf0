/**
 * SPEC §7 at shutdown: the provider has rotated a session's refresh token but Redis refused the
 * compare-and-set, so the new set waits in the process (session/unsaved-refreshes.ts) and is
 * retried every second. If Redis comes back and the process is stopped before the next retry,
 * the new set holds the only valid refresh token. The runtime's close writes it once more
 * before closing Redis, and releases the session's refresh lock.
 *
 * The gateway's own redis-server. A separate connection denies EVAL with Redis ACL while the
 * refresh grant is at the provider, so only the compare-and-set (and the lock's Lua re-arm and
 * release) fails. It is allowed again and the gateway closed at once, well inside the 1 s retry
 * period.
 *
 * Fails if, in runtime.ts close, `await coordinator.close();` loses its `await` (Redis is then
 * closed under the last write), or in session/unsaved-refreshes.ts close() the last write is
 * dropped (the body back to `kept.clear()`).
 */
import { Redis } from 'ioredis';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { isGrant, startFrontedProvider, startProviderFront, type ProviderFront } from '../../support/provider-front.js';
import { startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { digest } from '../../../src/redis/keys.js';
import { eventually } from '../../support/wait.js';
import type { Config } from '../../../src/config/load.js';

const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
let redis: RedisServer;
let admin: Redis;
let front: ProviderFront;
let provider: TestProvider;
let upstream: Upstream;
let gw: TestGateway | undefined;
/** Another instance on the same Redis, to look at what the closed one left. */
let other: TestGateway;
let config: Config;

beforeAll(async () => {
  redis = await startRedisServer();
  admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  upstream = await startUpstream();
  front = await startProviderFront();
  const reserved = await reserveServer();
  provider = await startFrontedProvider(front, { clients: [gatewayClient(reserved.url)] });
  config = buildTestConfig({
    issuer: front.url,
    publicUrl: reserved.url,
    redisUrl: redis.url,
    routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
  });
  gw = await startTestGateway(config, reserved, { clock });
  other = await startTestGateway(config, undefined, { clock });
});

afterAll(async () => {
  await admin?.call('ACL', 'SETUSER', 'default', '+@all');
  await gw?.close();
  await other?.close();
  await provider?.close();
  await front?.close();
  await upstream?.close();
  admin?.disconnect();
  await redis?.close();
});

// Fails if, in session/refresh.ts close, the wait for the refreshes under way goes (the body
// back to `await unsaved.close();`): the gateway closed Redis while the provider was answering,
// the rotated set it then issued was never written, and the session's next refresh (with the
// spent refresh token) signed the user out.
it('waits, when closed, for a refresh under way: the set the provider issues meanwhile is written and the session lives on', async () => {
  const closing = await startTestGateway(config, undefined, { clock });
  const client = new BrowserClient({ timeoutMs: 10_000 });
  await signIn(client, (gw as TestGateway).url);
  const name = config.derived.sessionCookieName;
  const cookie = client.cookies((gw as TestGateway).url)[name] as string;
  const before = await tokensOfSession(other, cookie);
  expect(before?.refreshToken).toEqual(expect.any(String));

  // The refresh grant is held at the front until the closing gateway says it waits for it.
  clock.advance((before?.expiresAt as number) - Math.floor(clock.now() / 1000) + 1);
  const waiting = () => closing.logs.some((l) => l.includes('"event":"shutdown_refreshes"'));
  const grants = () => front.requests.filter((r) => isGrant(r, 'refresh_token')).length;
  const grantsBefore = grants();
  front.intercept(async (req) => {
    if (isGrant(req, 'refresh_token')) await eventually('the gateway to wait for the refresh', 10_000, () => waiting() || undefined).catch(() => undefined);
    return undefined;
  });
  try {
    const caller = new BrowserClient({ timeoutMs: 10_000 });
    caller.setCookie(closing.url, name, cookie);
    const call = caller.get(`${closing.url}/api/echo`, { headers: csrf }).catch(() => undefined);
    await eventually('the refresh grant to reach the front', 10_000, () => grants() > grantsBefore || undefined);
    await closing.close();
    await call;
  } finally {
    front.intercept(undefined);
  }
  expect(waiting()).toBe(true);
  const after = await tokensOfSession(other, cookie);
  expect(after?.refreshToken).not.toBe(before?.refreshToken);
  const elsewhere = new BrowserClient();
  elsewhere.setCookie(other.url, name, cookie);
  expect((await elsewhere.get(`${other.url}/api/echo`, { headers: csrf })).status).toBe(200);
}, 30_000);

it('writes a refreshed token set still waiting for Redis when the gateway is closed, and releases its refresh lock', async () => {
  const closing = gw as TestGateway;
  const client = new BrowserClient({ timeoutMs: 10_000 });
  await signIn(client, closing.url);
  const cookie = client.cookies(closing.url)[closing.config.derived.sessionCookieName] as string;
  const sessionDigest = digest(sessionIdFromCookie(cookie));
  const before = await tokensOfSession(other, cookie);
  expect(before?.refreshToken).toEqual(expect.any(String));

  // The access token expires; EVAL is denied while the provider answers the refresh grant.
  clock.advance((before?.expiresAt as number) - Math.floor(clock.now() / 1000) + 1);
  front.intercept(async (req) => {
    if (isGrant(req, 'refresh_token')) await admin.call('ACL', 'SETUSER', 'default', '-eval');
    return undefined;
  });
  const grantsBefore = provider.counters.grants.refresh_token ?? 0;
  const during = await client.get(`${closing.url}/api/echo`, { headers: csrf });
  front.intercept(undefined);
  expectErrorBody(during, 'session_store_unavailable', 503);
  expect(provider.counters.grants.refresh_token ?? 0).toBe(grantsBefore + 1);
  expect(closing.runtime.refresher).toHaveProperty('unsaved.size', 1);

  // Redis takes EVAL again; the gateway stops before its next retry.
  await admin.call('ACL', 'SETUSER', 'default', '+eval');
  expect((await tokensOfSession(other, cookie))?.refreshToken).toBe(before?.refreshToken);
  gw = undefined;
  await closing.close();

  const after = await tokensOfSession(other, cookie);
  expect(after?.refreshToken).not.toBe(before?.refreshToken);
  expect((await provider.introspect(after?.refreshToken as string)).active).toBe(true);
  expect(await admin.exists(other.runtime.keys.refreshLock(sessionDigest))).toBe(0);
}, 30_000);
