/**
 * A process stopped (a rolling deploy) while Redis is down, holding a token set the provider
 * issued and Redis did not take: its rotated refresh token is the only valid one. close() gave
 * it one last write, which failed, and dropped it; once Redis was back, the next refresh (on
 * any instance) spent the old token, and the provider revoked the grant (found by red team).
 * Now close() tries again every second within its budget (session/refresh.ts closeWaitMs), so
 * a Redis that comes back meanwhile takes the set.
 *
 * Fails if, in src/session/refresh.ts close, the unsaved sets get no budget (`unsaved.close(0)`):
 * the set is given up, the record keeps the spent refresh token.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { isGrant, startFrontedProvider, startProviderFront, type ProviderFront } from '../../support/provider-front.js';
import { startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';

const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
let redis: RedisServer;
let front: ProviderFront;
let provider: TestProvider;
let upstream: Upstream;
let a: TestGateway;
let b: TestGateway;

beforeAll(async () => {
  redis = await startRedisServer({ extraArgs: ['--appendonly', 'yes', '--appendfsync', 'always'] });
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
  a = await startTestGateway(config, reserved, { clock });
  b = await startTestGateway(config, undefined, { clock });
});

afterAll(async () => {
  await b?.close();
  await provider?.close();
  await front?.close();
  await upstream?.close();
  await redis?.close();
});

it('writes the set it kept once Redis is back within its shutdown budget: the session goes on, one grant', async () => {
  const client = new BrowserClient({ timeoutMs: 15_000 });
  await signIn(client, a.url);
  const name = b.config.derived.sessionCookieName;
  const cookie = client.cookies(a.url)[name] as string;
  client.setCookie(b.url, name, cookie);
  const before = await tokensOfSession(b, cookie);

  clock.advance((before?.expiresAt as number) - Math.floor(clock.now() / 1000) + 1);
  let grants = 0;
  front.intercept(async (req) => {
    if (isGrant(req, 'refresh_token') && ++grants === 1) await redis.stop();
    return undefined;
  });
  expectErrorBody(await client.get(`${a.url}/api/echo`, { headers: csrf }), 'session_store_unavailable', 503);

  // Stopped while Redis is down; Redis comes back while it closes.
  const closing = a.close();
  await redis.start();
  await closing;

  const kept = await tokensOfSession(b, cookie);
  expect(kept?.refreshToken).not.toBe(before?.refreshToken);
  expect((await provider.introspect(kept?.refreshToken as string)).active).toBe(true);
  front.intercept(undefined);
  expect((await client.get(`${b.url}/api/echo`, { headers: csrf })).status).toBe(200);
  expect(grants).toBe(1);
}, 60_000);
