/**
 * The demo's fallback when no Redis answers: an in-process Redis emulation (ioredis-mock,
 * which runs our Lua scripts too). Nothing survives a restart and nothing is shared between
 * processes, so only configs with a `dev:` section may use it.
 */
import RedisMock from 'ioredis-mock';
import type { RedisClient } from './client.js';

export function createMemoryRedis(): RedisClient {
  return new RedisMock() as unknown as RedisClient;
}
