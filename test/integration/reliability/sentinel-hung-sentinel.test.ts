/**
 * Three sentinels (quorum 2); the one the gateway asked last hangs (SIGSTOP: its port accepts,
 * nothing answers: a host that hangs with its co-located sentinel), and the master dies. The
 * two healthy sentinels promote the replica: two of three is what Sentinel is deployed
 * three-wide for. The gateway must follow (found by red team: ioredis asks the sentinels one at
 * a time, starting with the last it used, and without `sentinelCommandTimeout` the question to
 * the hung one never returned: 503 on every call, for good).
 *
 * Mutation that fails this file (checked by hand): src/redis/client.ts createRedis, the
 * Sentinel branch without `sentinelCommandTimeout`.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startRedisSentinel, type RedisSentinelSet } from '../../support/redis-sentinel.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
let set: RedisSentinelSet;
let upstream: Upstream;
let stack: Stack;

beforeAll(async () => {
  set = await startRedisSentinel({ sentinels: 3 });
  upstream = await startUpstream();
  stack = await startStack({
    config: {
      redis: { url: undefined, commandTimeoutMs: 1000, sentinel: { name: set.name, nodes: set.nodes } },
      routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
    },
  });
}, 90_000);

afterAll(async () => {
  for (const s of set?.sentinels ?? []) s.resume();
  await stack?.close();
  await upstream?.close();
  await set?.close();
});

it('follows a promotion made by two healthy sentinels while the third, the one it asked, hangs', async () => {
  const client = new BrowserClient({ timeoutMs: 10_000 });
  await signIn(client, stack.gateway.url);
  expect((await client.get(`${stack.gateway.url}/api/echo`, { headers: csrf })).status).toBe(200);
  const replica = set.replica;
  if (!replica) throw new Error('the set has a replica');
  await set.waitForReplica(set.master);

  // ioredis starts with the first node it is given and keeps to the one that answered.
  set.sentinels[0]?.pause();
  await set.master.stop();
  await set.waitForMaster(replica, 30_000);

  const seen = new Map<number, number>();
  await eventually(
    'a 200 through the promoted replica',
    30_000,
    async () => {
      const res = await client.get(`${stack.gateway.url}/api/echo`, { headers: csrf });
      seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
      return res.status === 200;
    },
    { intervalMs: 200 },
  );
  expect([...seen.keys()].filter((status) => status !== 200 && status !== 503)).toEqual([]);
  expect((await client.get(`${stack.gateway.url}/readyz`)).status).toBe(200);
}, 120_000);
