/**
 * A refresh lock's SET NX held on the wire past commandTimeoutMs, then run by Redis after all
 * (a latency spike; found by red team). The call that asked answers 503, fairly; but the lock
 * then stood in Redis with a token no one held, for its whole TTL (15 s): every call of that
 * session with an expired token, on every process, waited 12 s for a refresh no one was doing,
 * then got 502. Now a release with the same token follows the timed-out SET on its connection.
 *
 * Fails if, in src/redis/lock.ts tryLock, the release in the catch is removed: the lock stays
 * for its TTL (and the next call would wait out maxWaitMs for a 502 token_refresh_failed).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { startRedisStall, type RedisStall } from '../../support/redis-stall.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';
import { digest } from '../../../src/redis/keys.js';

const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
let redis: RedisServer;
let stall: RedisStall;
let provider: TestProvider;
let upstream: Upstream;
let gw: TestGateway;

beforeAll(async () => {
  redis = await startRedisServer();
  stall = await startRedisStall(redis.url);
  upstream = await startUpstream();
  const reserved = await reserveServer();
  provider = await startTestProvider({ clients: [gatewayClient(reserved.url)] });
  const config = buildTestConfig({
    issuer: provider.issuer,
    publicUrl: reserved.url,
    redisUrl: stall.url,
    redis: { commandTimeoutMs: 1000 },
    routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
  });
  gw = await startTestGateway(config, reserved, { clock });
});

afterAll(async () => {
  stall?.release();
  await gw?.close();
  await stall?.close();
  await upstream?.close();
  await provider?.close();
  await redis?.close();
});

it('a lock whose SET timed out and ran late is released behind it: the next call refreshes', async () => {
  const client = new BrowserClient({ timeoutMs: 20_000 });
  await signIn(client, gw.url);
  const cookie = client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
  const tokens = await tokensOfSession(gw, cookie);
  clock.advance((tokens?.expiresAt as number) - Math.floor(clock.now() / 1000) + 1);

  const lock = gw.runtime.keys.refreshLock(digest(sessionIdFromCookie(cookie)));
  const held = stall.holdAt(lock);
  const first = client.get(`${gw.url}/api/echo`, { headers: csrf });
  await held;
  expectErrorBody(await first, 'session_store_unavailable', 503);
  stall.release();
  await eventually('the late SET and its release to run', 10_000, async () => (await gw.runtime.redis.exists(lock)) === 0 || undefined);

  const next = await client.get(`${gw.url}/api/echo`, { headers: csrf });
  expect(next.status).toBe(200);
  expect((await tokensOfSession(gw, cookie))?.accessToken).not.toBe(tokens?.accessToken);
}, 40_000);
