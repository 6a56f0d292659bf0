import type { RedisServer } from './redis-server.js';

// Must match global-setup.ts: globalThis is the only channel Jest gives the two hooks.
const SERVER_KEY = '__bffTestRedisServer';
type WithServer = typeof globalThis & { [SERVER_KEY]?: RedisServer };

export default async function globalTeardown(): Promise<void> {
  const g = globalThis as WithServer;
  const server = g[SERVER_KEY];
  if (!server) return;
  delete g[SERVER_KEY];
  delete process.env.BFF_TEST_REDIS_URL;
  await server.close();
}
