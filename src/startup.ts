/**
 * What stops startup with one line (main.ts prints it and exits): StartupError, and the first
 * connection to the configured Redis, which must answer before the gateway serves (and whose
 * eviction setting is said, at that and every later connection).
 */
import type { Config } from './config/load.js';
import type { Logger } from './observability/logger.js';
import type { Metrics } from './observability/metrics.js';
import { connectRedis, createRedis, disconnectRedis, type RedisClient } from './redis/client.js';
import { mayEvict, watchEvictionSettings } from './redis/eviction.js';
import { atMostEvery } from './clock.js';

export class StartupError extends Error {
  override readonly name = 'StartupError';
}

export async function connectConfiguredRedis(config: Config, logger: Logger, metrics: Metrics, clock: () => number): Promise<RedisClient> {
  // ioredis reports every reconnect attempt; one line per 10 s is enough to see an outage.
  const mayLog = atMostEvery(10_000, clock);
  const client = createRedis(config.redis, {
    onError(err) {
      metrics.redisErrors.inc({ kind: 'connection' });
      if (mayLog()) logger.warn({ event: 'redis_error', err }, 'Redis connection problem');
    },
  });
  try {
    await connectRedis(client, Math.max(config.redis.commandTimeoutMs * 3, 3000));
  } catch (err) {
    // Through disconnectRedis: it also stops the client's command-deadline tick.
    disconnectRedis(client);
    throw new StartupError(`redis: cannot connect (${err instanceof Error ? err.message : 'unknown error'})`);
  }
  warnOfEviction(client, logger, metrics);
  return client;
}

function warnOfEviction(client: RedisClient, logger: Logger, metrics: Metrics): void {
  let said = '';
  watchEvictionSettings(client, (settings) => {
    const evicting = settings.filter(mayEvict);
    metrics.redisMayEvict.set(evicting.length > 0 ? 1 : 0);
    // Once per setting seen (at startup, and again only if a connection finds another).
    const now = evicting.map((s) => `${s.policy} ${s.maxmemoryBytes}`).join(', ');
    if (now && now !== said) {
      const { policy, maxmemoryBytes } = evicting[0]!;
      logger.warn(
        { event: 'redis_eviction_policy', policy, maxmemoryBytes, nodes: evicting.length },
        `Redis may evict the gateway's keys (maxmemory-policy ${policy} with maxmemory set): an evicted key can let a back-channel logout end nothing, take a replayed logout token, or sign users out. Set maxmemory-policy noeviction (README, Redis).`,
      );
    }
    said = now;
  });
}
