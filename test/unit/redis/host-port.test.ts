/**
 * Redis nodes as ioredis takes them: a Sentinel node written without a port is Sentinel's port,
 * 26379, not Redis's (it was 6379: a Redis server, which answers no SENTINEL command).
 *
 * The createRedis case fails if, in redis/client.ts, the sentinels are mapped with
 * `hostPort(node)` instead of `hostPort(node, SENTINEL_PORT)`.
 */
import type { Redis } from 'ioredis';
import { createRedis, disconnectRedis, hostPort, SENTINEL_PORT } from '../../../src/redis/client.js';

describe('hostPort', () => {
  it('gives a node without a port the default it is asked for', () => {
    expect(hostPort('sentinel-1', SENTINEL_PORT)).toEqual({ host: 'sentinel-1', port: 26379 });
    expect(hostPort('redis-0')).toEqual({ host: 'redis-0', port: 6379 });
  });

  it('keeps a port that is written, and reads URLs and bracketed IPv6', () => {
    expect(hostPort('sentinel-1:26380', SENTINEL_PORT)).toEqual({ host: 'sentinel-1', port: 26380 });
    expect(hostPort('rediss://cache.internal:6380')).toEqual({ host: 'cache.internal', port: 6380 });
    expect(hostPort('[::1]:7000')).toEqual({ host: '::1', port: 7000 });
    expect(hostPort('[fd00::1]', SENTINEL_PORT)).toEqual({ host: 'fd00::1', port: 26379 });
  });

  it('gives createRedis sentinels without a port the Sentinel port (nothing is connected: lazyConnect)', () => {
    const client = createRedis({ sentinel: { name: 'main', nodes: ['sentinel-1', 'sentinel-2:26390'] }, keyPrefix: 'x:', commandTimeoutMs: 1000 }) as Redis;
    try {
      expect(client.options.sentinels).toEqual([
        { host: 'sentinel-1', port: 26379 },
        { host: 'sentinel-2', port: 26390 },
      ]);
    } finally {
      disconnectRedis(client);
    }
  });
});
