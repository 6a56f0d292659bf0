/**
 * What stops startup with one line (main.ts prints it and exits): StartupError, and the first
 * connection to the configured Redis, which must answer before the gateway serves.
 */
import type { Config } from './config/load.js';
import type { Logger } from './observability/logger.js';
import type { Metrics } from './observability/metrics.js';
import { connectRedis, createRedis, disconnectRedis, type RedisClient } from './redis/client.js';
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
  return client;
}
