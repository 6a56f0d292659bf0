/**
 * Redis Sentinel through ioredis (`redis.sentinel`): the gateway asks a real sentinel for the
 * master and runs sign-in, a refresh and logout against it.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock } from '../../support/gateway.js';
import { startRedisSentinel, type RedisSentinelSet } from '../../support/redis-sentinel.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
let sentinel: RedisSentinelSet;
let upstream: Upstream;
let stack: Stack;

beforeAll(async () => {
  // No replica: no failover here (sentinel-failover.test.ts has one).
  sentinel = await startRedisSentinel({ replica: false });
  upstream = await startUpstream();
  stack = await startStack({
    clock,
    config: {
      redis: { url: undefined, sentinel: { name: sentinel.name, nodes: sentinel.nodes } },
      routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
    },
  });
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
  await sentinel?.close();
});

it('signs in, refreshes and logs out with sessions in the master that Sentinel names', async () => {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  expect((await client.get(`${stack.gateway.url}/auth/user`, { headers: csrf })).status).toBe(200);
  const grants = stack.provider.counters.grants.refresh_token ?? 0;
  clock.advance(3600);
  expect((await client.get(`${stack.gateway.url}/api/echo`, { headers: csrf })).status).toBe(200);
  expect((stack.provider.counters.grants.refresh_token ?? 0) - grants).toBe(1);

  // The session lives in the master the sentinel pointed at.
  const keys = await sentinel.master.keys(`${stack.config.redis.keyPrefix}sess:*`);
  expect(keys.length).toBeGreaterThan(0);

  expect((await client.post(`${stack.gateway.url}/auth/logout`, { headers: csrf })).status).toBe(200);
  expect((await client.get(`${stack.gateway.url}/auth/user`, { headers: csrf })).status).toBe(401);
});
