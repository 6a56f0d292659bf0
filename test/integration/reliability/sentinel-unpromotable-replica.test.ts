/**
 * A session end acknowledged only by a replica Sentinel will never promote (found by review):
 * the gateway took `WAIT 1` returning 1 as safe, but a `replica-priority 0` replica (a backup
 * or remote-site one, a documented setup) acknowledged it while the replica Sentinel promotes
 * was cut off. The write was forgotten, and the failover undid the logout (a copy of the cookie
 * signed in again). Now every connected replica is asked, and a write counts as acknowledged
 * only while as many replicas are connected as were in the last ten minutes.
 *
 * Staged deterministically: master A; replica B through a TCP gate (shut before the logout: B
 * never gets it); replica C straight from A with replica-priority 0 (it acknowledges). A is
 * killed; the sentinel promotes B.
 *
 * Mutation that fails it (checked by hand): src/redis/replica-acks.ts ask(),
 * `>= expected` → `>= 1`.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { adminCall, startRedisSentinel, type RedisSentinelSet } from '../../support/redis-sentinel.js';
import type { RedisServer } from '../../support/redis-server.js';
import { statusThroughFailover } from '../../support/session-calls.js';
import { startStack, type Stack } from '../../support/stack.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
let set: RedisSentinelSet;
let stack: Stack;
let backup: RedisServer;

beforeAll(async () => {
  // failover-timeout 60 s: the sentinel "fixes" a replica whose master address is not the
  // master's (B's, through the gate) after failover-timeout; 10 s was less than this setup takes.
  set = await startRedisSentinel({ sentinels: 1, gatedReplication: true, failoverTimeoutMs: 60_000 });
  backup = await set.startReplica(set.master);
  await adminCall(backup.port, 'CONFIG', 'SET', 'replica-priority', '0');
  // The sentinel reads a replica's priority from its INFO (every 10 s outside a failover).
  await eventually(
    'the sentinel knowing the backup replica has priority 0',
    30_000,
    async () => {
      const replicas = ((await adminCall(set.sentinelPort, 'SENTINEL', 'replicas', set.name)) as string[][] | null) ?? [];
      return replicas.some((r) => {
        const i = r.indexOf('port');
        const p = r.indexOf('slave-priority');
        return r[i + 1] === String(backup.port) && r[p + 1] === '0';
      });
    },
    { intervalMs: 250 },
  );
  stack = await startStack({
    config: { redis: { url: undefined, commandTimeoutMs: 1000, sentinel: { name: set.name, nodes: set.nodes } } },
  });
}, 90_000);

afterAll(async () => {
  await stack?.close();
  await set?.close();
});

const statusWith = (cookie: string, path: string) => statusThroughFailover(stack.gateway.url, cookie, path);

it('a logout acknowledged only by a replica Sentinel will not promote stays done after the failover', async () => {
  const name = stack.config.derived.sessionCookieName;
  const browser = new BrowserClient({ timeoutMs: 10_000 });
  await signIn(browser, stack.gateway.url, { user: 'alice', password: 'alice-password' });
  const cookie = `${name}=${browser.cookies(stack.gateway.url)[name]}`;
  expect(await statusWith(cookie, '/auth/user')).toBe(200);
  // Both replicas hold the session.
  expect(Number(await adminCall(set.master.port, 'WAIT', '2', '5000'))).toBe(2);

  set.replicationGate?.shut(); // B gets nothing from here on; C still replicates.
  expect((await browser.post(`${stack.gateway.url}/auth/logout`, { headers: csrf })).status).toBe(200);
  expect(await statusWith(cookie, '/auth/user')).toBe(401);

  const promoted = set.replica as RedisServer;
  // Staging check: C (priority 0) took the end, B (the one Sentinel will promote) did not.
  expect(String(await adminCall(backup.port, 'KEYS', '*sess*'))).toMatch(/ended-sess:/);
  expect(String(await adminCall(promoted.port, 'KEYS', '*sess*'))).toMatch(/(^|,)[^,]*:sess:/);
  await set.master.stop();
  await set.waitForMaster(promoted, 30_000);

  // The end is applied again on the promoted replica within a few seconds (as for an
  // unacknowledged one, sentinel-lost-writes.test.ts), or it was never at risk.
  let status = 0;
  await eventually('the logout to hold on the promoted replica', 15_000, async () => (status = await statusWith(cookie, '/auth/user')) === 401, { intervalMs: 300 }).catch(() => undefined);
  expect(status).toBe(401);
}, 150_000);
