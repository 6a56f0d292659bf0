/**
 * A Redis that may evict the gateway's keys is said at startup and at every later connection
 * (log `redis_eviction_policy`, gauge `bff_redis_may_evict`): evicted, the keys that guard
 * sessions (a user's index, a logout token's replay note) let a back-channel logout end nothing
 * or a replayed one through (found by the hygiene red team; src/redis/eviction.ts).
 *
 * Mutations that fail this file: src/redis/eviction.ts mayEvict without its `maxmemoryBytes > 0`
 * (the unlimited Redis is warned of), `watchEvictionSettings` without its `ready` listener (a
 * changed setting is never read again), or src/redis/client.ts writtenNodes answering `[client]`
 * for a Cluster too (one node read).
 */
import { Redis } from 'ioredis';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { startRedisCluster, startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { eventually } from '../../support/wait.js';

let provider: TestProvider;

beforeAll(async () => {
  provider = await startTestProvider({ clients: [gatewayClient('http://127.0.0.1:1')] });
}, 30_000);
afterAll(() => provider?.close());

async function gatewayOn(redis: { url: string } | { nodes: string[] }): Promise<TestGateway> {
  const reserved = await reserveServer();
  const config = buildTestConfig({
    issuer: provider.issuer,
    publicUrl: reserved.url,
    ...('url' in redis ? { redisUrl: redis.url } : { redis: { cluster: { nodes: redis.nodes }, url: undefined } }),
  });
  return startTestGateway(config, reserved);
}

async function mayEvictGauge(gw: TestGateway): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const line = /^bff_redis_may_evict (\d+)$/m.exec(text);
  if (!line) throw new Error('bff_redis_may_evict not in /metrics');
  return Number(line[1]);
}

const warnings = (gw: TestGateway) =>
  gw.logs.map((l) => JSON.parse(l) as { event?: string; policy?: string; level?: number; nodes?: number }).filter((l) => l.event === 'redis_eviction_policy');

describe('a single Redis', () => {
  let server: RedisServer;
  let admin: Redis;
  let gw: TestGateway;

  beforeAll(async () => {
    server = await startRedisServer({ extraArgs: ['--maxmemory', '64mb', '--maxmemory-policy', 'allkeys-lru'] });
    admin = new Redis(server.url);
  }, 30_000);
  afterAll(async () => {
    await gw?.close();
    admin?.disconnect();
    await server?.close();
  });

  it('with maxmemory and an evicting policy: warned at startup, once, and the gauge says 1', async () => {
    gw = await gatewayOn({ url: server.url });
    await eventually('the warning', 5_000, async () => warnings(gw).length === 1);
    expect(warnings(gw)[0]).toMatchObject({ policy: 'allkeys-lru', level: 40 });
    expect(await mayEvictGauge(gw)).toBe(1);
  });

  it('read again at each connection: noeviction clears the gauge, another policy is warned of again', async () => {
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    await eventually('the gauge at 0', 10_000, async () => (await mayEvictGauge(gw)) === 0);
    await admin.config('SET', 'maxmemory-policy', 'volatile-ttl');
    await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    await eventually('the gauge at 1', 10_000, async () => (await mayEvictGauge(gw)) === 1);
    expect(warnings(gw).map((w) => w.policy)).toEqual(['allkeys-lru', 'volatile-ttl']);
  });

  it('without maxmemory nothing is evicted, whatever the policy says: no warning, gauge 0', async () => {
    await admin.config('SET', 'maxmemory', '0');
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    const other = await gatewayOn({ url: server.url });
    try {
      // The startup check's INFO went out before this PING on the same connection, and Redis
      // answers in order: once /readyz answers, the check has reported.
      expect((await fetch(`${other.url}/readyz`, { signal: AbortSignal.timeout(10_000) })).status).toBe(200);
      expect(await mayEvictGauge(other)).toBe(0);
      expect(warnings(other)).toEqual([]);
    } finally {
      await other.close();
    }
  });
});

describe('a Redis Cluster', () => {
  it('every master is read, and those that may evict are counted', async () => {
    const cluster = await startRedisCluster({ masters: 3 });
    let gw: TestGateway | undefined;
    try {
      // Two masters of three, set up alike: the warning counts both.
      for (const server of cluster.servers.slice(1, 3)) {
        const node = new Redis(server.url);
        await node.config('SET', 'maxmemory', '64mb');
        await node.config('SET', 'maxmemory-policy', 'volatile-lru');
        node.disconnect();
      }
      gw = await gatewayOn({ nodes: cluster.nodes });
      await eventually('the warning', 10_000, async () => warnings(gw!).length === 1);
      expect(warnings(gw)[0]).toMatchObject({ policy: 'volatile-lru', nodes: 2 });
      expect(await mayEvictGauge(gw)).toBe(1);
    } finally {
      await gw?.close();
      await cluster.close();
    }
  }, 60_000);

  // Found by review: one master that could not say (INFO refused) failed the whole read, every
  // master counted as read, and none was asked again until the masters changed: the evicting
  // master went unsaid for good. Fails if watchEvictionSettings counts a node that did not
  // answer as read (its `read.delete(...)` line removed).
  it('a master that could not say at first is read again at a later slot refresh', async () => {
    const cluster = await startRedisCluster({ masters: 3 });
    let gw: TestGateway | undefined;
    const evicting = new Redis(cluster.servers[1]!.url);
    try {
      await evicting.config('SET', 'maxmemory', '64mb');
      await evicting.config('SET', 'maxmemory-policy', 'allkeys-lru');
      // The gateway connects as the default user: INFO refused on that one master.
      await evicting.call('ACL', 'SETUSER', 'default', '-info');
      gw = await gatewayOn({ nodes: cluster.nodes });
      expect((await fetch(`${gw.url}/readyz`, { signal: AbortSignal.timeout(10_000) })).status).toBe(200);
      expect(warnings(gw)).toEqual([]);
      await evicting.call('ACL', 'SETUSER', 'default', '+info');
      await eventually('the warning, at a later slot refresh', 30_000, async () => warnings(gw!).length === 1);
      expect(warnings(gw)[0]).toMatchObject({ policy: 'allkeys-lru', nodes: 1 });
      expect(await mayEvictGauge(gw)).toBe(1);
    } finally {
      evicting.disconnect();
      await gw?.close();
      await cluster.close();
    }
  }, 60_000);

  // Found by review: a replica promoted within a shard is no reconnection of the Cluster client,
  // so its setting went unread. Fails if watchEvictionSettings has no 'refresh' listener.
  it('a replica promoted to master is read as it is promoted', async () => {
    const cluster = await startRedisCluster({ masters: 3, replicas: true });
    let gw: TestGateway | undefined;
    try {
      const roles = await Promise.all(cluster.servers.map(async (server) => {
        const node = new Redis(server.url);
        try {
          return { server, replica: /role:slave/.test(await node.info('replication')) };
        } finally {
          node.disconnect();
        }
      }));
      const replica = roles.find((r) => r.replica)?.server;
      if (!replica) throw new Error('no replica in the cluster');
      const node = new Redis(replica.url);
      try {
        await node.config('SET', 'maxmemory', '64mb');
        await node.config('SET', 'maxmemory-policy', 'allkeys-lru');
        gw = await gatewayOn({ nodes: cluster.nodes });
        // Masters only, all noeviction: nothing to say yet (the replica is not written to).
        expect((await fetch(`${gw.url}/readyz`, { signal: AbortSignal.timeout(10_000) })).status).toBe(200);
        expect(warnings(gw)).toEqual([]);
        await node.cluster('FAILOVER');
      } finally {
        node.disconnect();
      }
      await eventually('the promoted master warned of', 20_000, async () => warnings(gw!).length === 1);
      expect(warnings(gw)[0]).toMatchObject({ policy: 'allkeys-lru', nodes: 1 });
      expect(await mayEvictGauge(gw)).toBe(1);
    } finally {
      await gw?.close();
      await cluster.close();
    }
  }, 90_000);
});
