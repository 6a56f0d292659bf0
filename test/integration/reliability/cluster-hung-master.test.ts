/**
 * A Redis Cluster whose master hangs (SIGSTOP: a frozen VM, a partition that keeps its TCP
 * connections open) while its replica is promoted. A hung node never answers MOVED nor closes
 * its connections, so a client that only re-reads the slot map on those sent that master's
 * slots there for as long as it hung: every call of its sessions answered 503, and no one could
 * sign in when it held the sign-in cap's key, with the data on a healthy new master the whole
 * time (found by red team). The gateway re-reads the map every 2 s.
 *
 * Mutation that fails this file (checked by hand): src/redis/client.ts, the cluster options'
 * `slotsRefreshInterval: SLOTS_REFRESH_MS,` line removed: the first test.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { sessionIdFromCookie } from '../../support/assertions.js';
import { startRedisCluster, type RedisCluster, type RedisServer } from '../../support/redis-server.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually } from '../../support/wait.js';
import { digest } from '../../../src/redis/keys.js';

const csrf = { 'x-csrf': '1' };
let cluster: RedisCluster;
let upstream: Upstream;
let stack: Stack;
const paused: RedisServer[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster({ replicas: true, nodeTimeoutMs: 1000 });
  upstream = await startUpstream();
  stack = await startStack({
    config: {
      redis: { cluster: { nodes: cluster.nodes }, url: undefined, commandTimeoutMs: 1000 },
      routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
    },
  });
}, 90_000);

afterAll(async () => {
  for (const server of paused) server.resume();
  await stack?.close();
  await upstream?.close();
  await cluster?.close();
});

const live = () => cluster.servers.find((s) => !paused.includes(s));

/**
 * Hangs the master serving `key` until its replica serves it. A master that is itself a replica
 * promoted by an earlier test has none left: then the gateway is following a promotion already.
 */
async function hangMasterOf(key: string): Promise<boolean> {
  const { master, replica } = await cluster.ownerOf(key, live());
  if (!replica) return false;
  master.pause();
  paused.push(master);
  await cluster.promoted(replica, key, 20_000);
  return true;
}

it('follows the promotion of a hung master: the session in its slots works again, without a restart', async () => {
  const client = new BrowserClient({ timeoutMs: 15_000 });
  await signIn(client, stack.gateway.url);
  const cookie = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
  const sessionKey = stack.gateway.runtime.keys.session(digest(sessionIdFromCookie(cookie)));
  expect((await client.get(`${stack.gateway.url}/api/echo`, { headers: csrf })).status).toBe(200);

  expect(await hangMasterOf(sessionKey)).toBe(true);
  await eventually('a call of the session answered', 12_000, async () => (await client.get(`${stack.gateway.url}/api/echo`, { headers: csrf })).status === 200, {
    intervalMs: 250,
  });
  // And readiness says so every time (its PING goes to any master: the hung one is no longer one).
  const ready: number[] = [];
  for (let i = 0; i < 10; i++) ready.push((await new BrowserClient({ timeoutMs: 5_000 }).get(`${stack.gateway.url}/readyz`)).status);
  expect(ready).toEqual(Array.from({ length: 10 }, () => 200));
}, 60_000);

it('follows the promotion of a hung master holding the sign-in cap: sign-in works again', async () => {
  const key = stack.gateway.runtime.keys.activeTransactions();
  const login = () => new BrowserClient({ timeoutMs: 15_000 }).get(`${stack.gateway.url}/auth/login?returnTo=%2F`);
  expect((await login()).status).toBe(302);
  // Its master may be the replica the first test promoted (no replica of its own to promote):
  // the gateway follows that promotion already.
  await hangMasterOf(key);
  await eventually('a sign-in started', 12_000, async () => (await login()).status === 302, { intervalMs: 250 });
}, 60_000);
