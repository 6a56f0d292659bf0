// Jest global setup for the integration and e2e projects: one redis-server for the whole run,
// shared by every worker (test files isolate themselves by key prefix, not database number).
import type { RedisServer } from './redis-server.js';

// Jest runs setup and teardown in the same parent process and offers globalThis as the only
// channel between them; workers get the URL through the environment they inherit.
const SERVER_KEY = '__bffTestRedisServer';
type WithServer = typeof globalThis & { [SERVER_KEY]?: RedisServer };

export default async function globalSetup(): Promise<void> {
  if (process.env.REDIS_URL) return;
  const g = globalThis as WithServer;
  // Jest dedupes identical hook paths across projects, but a rerun in watch mode calls us again.
  if (g[SERVER_KEY]) return;
  // Jest loads global hooks with Node's own loader, outside moduleNameMapper, so the usual
  // `./x.js` specifier would not find the TypeScript source; Node 24 strips the types itself.
  const { redisServerAvailable, startRedisServer } = (await import(
    new URL('./redis-server.ts', import.meta.url).href
  )) as typeof import('./redis-server.js');
  if (!redisServerAvailable()) {
    throw new Error(
      'Integration tests need a real Redis: put redis-server on PATH (.ci/run installs it) or set REDIS_URL.',
    );
  }
  const server = await startRedisServer();
  g[SERVER_KEY] = server;
  process.env.BFF_TEST_REDIS_URL = server.url;
}
