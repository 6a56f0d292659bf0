/**
 * Redis Sentinel through ioredis (`redis.sentinel`): the gateway asks a real sentinel for the
 * master and runs sign-in, a refresh and logout against it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock } from '../../support/gateway.js';
import { findFreePort, startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
let master: RedisServer;
let sentinel: ChildProcess;
let dir: string;
let upstream: Upstream;
let stack: Stack;

async function askSentinel(port: number): Promise<string[] | null> {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.call('SENTINEL', 'get-master-addr-by-name', 'mymaster')) as string[] | null;
  } catch {
    return null;
  } finally {
    client.disconnect();
  }
}

async function waitForMaster(port: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const addr = await askSentinel(port);
    if (addr?.[1] === String(master.port)) return;
    if (Date.now() > deadline) throw new Error('sentinel did not report the master in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  master = await startRedisServer();
  dir = mkdtempSync(path.join(tmpdir(), 'bff-sentinel-'));
  const port = await findFreePort();
  const conf = path.join(dir, 'sentinel.conf');
  // Sentinel rewrites its own config file, so it gets a private, writable one.
  writeFileSync(conf, [`port ${port}`, 'bind 127.0.0.1', `dir ${dir}`, `sentinel monitor mymaster 127.0.0.1 ${master.port} 1`, ''].join('\n'));
  sentinel = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
  await waitForMaster(port);

  upstream = await startUpstream();
  stack = await startStack({
    clock,
    config: {
      redis: { url: undefined, sentinel: { name: 'mymaster', nodes: [`127.0.0.1:${port}`] } },
      routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
    },
  });
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
  sentinel?.kill('SIGKILL');
  await master?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('signs in, refreshes and logs out with sessions in the master that Sentinel names', async () => {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  expect((await client.get(`${stack.gateway.url}/auth/user`, { headers: csrf })).status).toBe(200);
  const grants = stack.provider.counters.grants.refresh_token ?? 0;
  clock.advance(3600);
  expect((await client.get(`${stack.gateway.url}/api/echo`, { headers: csrf })).status).toBe(200);
  expect((stack.provider.counters.grants.refresh_token ?? 0) - grants).toBe(1);

  // The session lives in the master the sentinel pointed at.
  const keys = await master.keys(`${stack.config.redis.keyPrefix}sess:*`);
  expect(keys.length).toBeGreaterThan(0);

  expect((await client.post(`${stack.gateway.url}/auth/logout`, { headers: csrf })).status).toBe(200);
  expect((await client.get(`${stack.gateway.url}/auth/user`, { headers: csrf })).status).toBe(401);
});
