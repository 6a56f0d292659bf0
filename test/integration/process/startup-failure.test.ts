/**
 * A gateway that cannot serve stops (SPEC §2: startup errors exit 1 with one line), whether it
 * is one process or a cluster. Found while testing the demo: with its port taken the CLI printed
 * "fatal: listen EADDRINUSE" and then kept running forever (Redis reconnects and provider
 * discovery held the process), so an orchestrator never saw it fail.
 *
 * Mutation check: in src/main.ts, drop the `await runtime.close()` of the listen failure path
 * → the single process never exits and the first test fails on its bound.
 *
 * Sentinels that hang (found by red team): with one paused among three the gateway never
 * started, and with only hung ones it printed "cannot start" and went on running, held by the
 * sentinel connection. Mutation: src/redis/client.ts without `sentinelCommandTimeout` → both
 * sentinel tests fail.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ensureBuilt, killAllCli, request, runCli, startCliGateway, withTimeout, writeConfigFile } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { gatewayClient } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { findFreePort, redisUrlForTests } from '../../support/redis-server.js';
import { startRedisSentinel } from '../../support/redis-sentinel.js';

let tmp: string;
let provider: TestProvider;
let squatter: net.Server;
let takenPort: number;

beforeAll(async () => {
  ensureBuilt();
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-startup-'));
  provider = await startTestProvider({ clients: [gatewayClient('http://127.0.0.1:1')] });
  takenPort = await findFreePort();
  squatter = net.createServer();
  await new Promise<void>((resolve) => squatter.listen(takenPort, '127.0.0.1', resolve));
}, 200_000);

afterAll(async () => {
  killAllCli();
  await new Promise<void>((resolve) => squatter.close(() => resolve()));
  await provider?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

function configOn(port: number, extra: Record<string, unknown> = {}, redis: Record<string, unknown> = { url: redisUrlForTests() }) {
  return writeConfigFile(tmp, `taken-${port}-${Object.keys(extra).join('-') || 'single'}.yaml`, {
    server: { port, host: '127.0.0.1', publicUrl: `http://127.0.0.1:${port}`, ...extra },
    oidc: { issuer: provider.issuer, clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef' },
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { ...redis, keyPrefix: `taken${port}:` },
    log: { level: 'info' },
  });
}

it('exits 1 with one line naming the address when its port is taken', async () => {
  const proc = runCli(['--config', configOn(takenPort)]);
  const exit = await withTimeout(proc.exited, 20_000, 'the gateway to exit');
  expect(exit.code).toBe(1);
  expect(proc.output()).toContain(`bff-gateway: cannot start: 127.0.0.1:${takenPort} is already in use`);
}, 30_000);

it('exits 1 as a cluster too: a worker that cannot start stops the whole (no restart loop)', async () => {
  const proc = runCli(['--config', configOn(takenPort, { workers: 2 })]);
  const exit = await withTimeout(proc.exited, 30_000, 'the cluster to exit');
  expect(exit.code).toBe(1);
  expect(proc.output()).toMatch(/bff-gateway: cannot start: worker \d+ exited \(code 1\) before it could serve/);
  expect(proc.output()).not.toMatch(/"event":"worker_exited"/);
}, 40_000);

it('exits 1 when the metrics port is taken, before any worker starts', async () => {
  const port = await findFreePort();
  const proc = runCli(['--config', configOn(port, { workers: 2, metricsPort: takenPort })]);
  const exit = await withTimeout(proc.exited, 20_000, 'the cluster to exit');
  expect(exit.code).toBe(1);
  expect(proc.output()).toContain(`is already in use`);
  expect(proc.output()).not.toMatch(/"event":"worker_started"/);
}, 30_000);

describe('sentinels that hang (accept, never answer)', () => {
  it('exits 1 with one line when every sentinel hangs, instead of running on after it', async () => {
    const held: net.Socket[] = [];
    const hung = net.createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    try {
      const node = `127.0.0.1:${(hung.address() as net.AddressInfo).port}`;
      const proc = runCli(['--config', configOn(await findFreePort(), {}, { sentinel: { name: 'mymaster', nodes: [node] }, commandTimeoutMs: 1000 })]);
      const exit = await withTimeout(proc.exited, 30_000, 'the gateway to exit');
      expect(exit.code).toBe(1);
      expect(proc.output()).toContain('bff-gateway: cannot start: redis: cannot connect');
    } finally {
      for (const socket of held) socket.destroy();
      hung.close();
    }
  }, 40_000);

  it('starts and serves on the one healthy sentinel of three (one killed, one hung)', async () => {
    const set = await startRedisSentinel({ sentinels: 3, replica: false });
    try {
      await set.sentinels[0]?.kill();
      set.sentinels[1]?.pause();
      const port = await findFreePort();
      const proc = await startCliGateway(configOn(port, {}, { sentinel: { name: set.name, nodes: set.nodes }, commandTimeoutMs: 1000 }), port);
      expect((await request(port, '/readyz')).status).toBe(200);
      proc.child.kill('SIGKILL');
      await withTimeout(proc.exited, 5_000, 'the gateway to exit');
    } finally {
      set.sentinels[1]?.resume();
      await set.close();
    }
  }, 90_000);
});
