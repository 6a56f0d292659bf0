/**
 * A gateway on a redis-server of its own (to be stopped, flushed, filled or tampered with), the
 * real provider and one upstream, routed by `route(upstreamUrl)`: the stage of the tests in which
 * Redis itself misbehaves (test/integration/reliability).
 */
import type { DevClient } from '../../src/dev/idp.js';
import type { TestConfigInput } from './gateway.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestClock, type TestGateway } from './gateway.js';
import { startTestProvider, type TestProvider } from './oidc-provider.js';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { startUpstream, type Upstream } from './upstream.js';

type Route = NonNullable<TestConfigInput['routes']>[number];

export interface OwnRedisStack {
  redis: RedisServer;
  provider: TestProvider;
  upstream: Upstream;
  gw: TestGateway;
  close(): Promise<void>;
}

export async function startOwnRedisStack(options: {
  route: (upstreamUrl: string) => Route;
  commandTimeoutMs: number;
  client?: Partial<DevClient>;
  clock?: TestClock;
}): Promise<OwnRedisStack> {
  const redis = await startRedisServer();
  const upstream = await startUpstream();
  const reserved = await reserveServer();
  const provider = await startTestProvider({ clients: [gatewayClient(reserved.url, options.client)] });
  const config = buildTestConfig({
    issuer: provider.issuer,
    publicUrl: reserved.url,
    redisUrl: redis.url,
    redis: { commandTimeoutMs: options.commandTimeoutMs },
    routes: [options.route(upstream.url)],
  });
  const gw = await startTestGateway(config, reserved, options.clock ? { clock: options.clock } : {});
  return {
    redis,
    provider,
    upstream,
    gw,
    async close() {
      await gw.close();
      await provider.close();
      await upstream.close();
      await redis.close();
    },
  };
}
