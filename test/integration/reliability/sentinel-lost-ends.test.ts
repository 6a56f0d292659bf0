/**
 * Session ends a Sentinel master took but never passed to its replica before it died (found by
 * red team): Redis replicates asynchronously, and the promoted replica had the session alive,
 * so a logout answered 200, and a back-channel logout the provider will not send again, were
 * undone (a copy of the cookie was signed in again). Staged deterministically: the replica
 * replicates through a TCP gate that is shut before the ends (their writes still unsent when
 * the master dies), the master is killed, and two of three sentinels promote the replica.
 *
 * Each end now asks for a replica's acknowledgement (WAIT on a connection of its own, after a
 * mark); one not acknowledged is applied again once the client reconnects to the promoted one.
 *
 * Mutation that fails this file (checked by hand): src/session/unreplicated-ends.ts
 * reapplyAll's loop body removed (`for (...) reapply(...)` → nothing).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startRedisSentinel, type RedisSentinelSet } from '../../support/redis-sentinel.js';
import { postLogoutToken } from '../../support/session-calls.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
let set: RedisSentinelSet;
let upstream: Upstream;
let stack: Stack;

beforeAll(async () => {
  set = await startRedisSentinel({ sentinels: 3, gatedReplication: true });
  upstream = await startUpstream();
  stack = await startStack({
    config: {
      redis: { url: undefined, commandTimeoutMs: 1000, sentinel: { name: set.name, nodes: set.nodes } },
      routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
    },
  });
}, 90_000);

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
  await set?.close();
});

/** `path` with a bare copy of the cookie, asked again while the gateway answers 503 (the switch). */
async function statusWith(cookie: string, path: string): Promise<number> {
  let status = 0;
  await eventually(
    `${path} answered (not 503)`,
    30_000,
    async () => {
      const res = await fetch(`${stack.gateway.url}${path}`, { headers: { cookie, ...csrf }, signal: AbortSignal.timeout(5_000) });
      status = res.status;
      await res.arrayBuffer();
      return status !== 503;
    },
    { intervalMs: 200 },
  );
  return status;
}

it('a logout and a back-channel logout answered 200 before a failover stay done after it', async () => {
  const name = stack.config.derived.sessionCookieName;
  const signedIn = async (user: string) => {
    const browser = new BrowserClient({ timeoutMs: 10_000 });
    await signIn(browser, stack.gateway.url, { user, password: `${user}-password` });
    return { browser, cookie: `${name}=${browser.cookies(stack.gateway.url)[name]}` };
  };
  const alice = await signedIn('alice');
  const bob = await signedIn('bob');
  expect(await statusWith(alice.cookie, '/auth/user')).toBe(200);
  expect(await statusWith(bob.cookie, '/auth/user')).toBe(200);
  await set.waitForReplica(set.master);

  // From here on, nothing the master takes reaches the replica.
  set.replicationGate?.shut();
  expect((await postLogoutToken(stack.gateway.url, await stack.provider.signLogoutToken({ sub: 'bob' }))).status).toBe(200);
  expect((await alice.browser.post(`${stack.gateway.url}/auth/logout`, { headers: csrf })).status).toBe(200);
  expect(await statusWith(alice.cookie, '/auth/user')).toBe(401);
  expect(await statusWith(bob.cookie, '/auth/user')).toBe(401);

  const replica = set.replica;
  if (!replica) throw new Error('the set has a replica');
  await set.master.stop();
  await set.waitForMaster(replica, 30_000);

  // The promoted replica had both sessions; the gateway ends them again once it reaches it.
  await eventually('both ends applied on the promoted replica', 30_000, async () => (await statusWith(alice.cookie, '/auth/user')) === 401 && (await statusWith(bob.cookie, '/auth/user')) === 401, {
    intervalMs: 200,
  });
}, 150_000);
