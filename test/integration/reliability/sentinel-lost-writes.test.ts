/**
 * Writes a Sentinel master took but never passed to its replica before it died (found by red
 * team): Redis replicates asynchronously, and the promoted replica had
 *  - the session alive, so a logout answered 200, and a back-channel logout the provider will
 *    not send again, were undone (a copy of the cookie was signed in again);
 *  - a refreshed session's old token set, whose refresh token the provider had rotated away:
 *    its next refresh was refused (invalid_grant) and the user signed out.
 * Staged deterministically: the replica replicates through a TCP gate that is shut before the
 * writes (still unsent when the master dies), the master is killed, and two of three
 * sentinels promote the replica.
 *
 * Each such write now asks for a replica's acknowledgement (WAIT on a connection of its own,
 * after a mark); one not acknowledged is made again once the client reconnects to the promoted one.
 *
 * Mutations that fail this file (checked by hand): src/session/unreplicated-writes.ts
 * reapplyAll's loop removed; src/session/refresh.ts without `void options.afterWrite?.(...)`
 * (the refresh part); src/runtime.ts afterWrite's `records.raiseTokens(d, {...})` →
 * `records.casTokens(d, seen, {...})` (the second of two refreshes written over exactly the
 * version it replaced).
 */
import { tokensOfSession } from '../../support/assertions.js';
import { BrowserClient } from '../../support/browser-client.js';
import { createTestClock } from '../../support/gateway.js';
import { signIn } from '../../support/drive-login.js';
import { startRedisSentinel, type RedisSentinelSet } from '../../support/redis-sentinel.js';
import { postLogoutToken, statusThroughFailover } from '../../support/session-calls.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
let set: RedisSentinelSet;
let upstream: Upstream;
let stack: Stack;

beforeAll(async () => {
  set = await startRedisSentinel({ sentinels: 3, gatedReplication: true });
  upstream = await startUpstream();
  stack = await startStack({
    clock,
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

const statusWith = (cookie: string, path: string) => statusThroughFailover(stack.gateway.url, cookie, path);

it('a logout, a back-channel logout and two refreshes answered before a failover stay done after it', async () => {
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

  const second = await signedIn('alice'); // a second session of hers: the one refreshed
  expect(await statusWith(second.cookie, '/api/echo')).toBe(200);

  // From here on, nothing the master takes reaches the replica.
  set.replicationGate?.shut();
  // The second session's access token expires twice: two refreshes, the provider rotating her
  // refresh token each time. Only the later set is remembered, and the promoted replica holds
  // the set before the first (found by review: written again over exactly the version it
  // replaced, it found an older one and wrote nothing).
  const grants = stack.provider.counters.grants.refresh_token ?? 0;
  for (let i = 0; i < 2; i += 1) {
    const before = await tokensOfSession(stack.gateway, decodeURIComponent(second.cookie.split('=')[1] as string));
    clock.advance((before?.expiresAt as number) - Math.floor(clock.now() / 1000) + 1);
    expect(await statusWith(second.cookie, '/api/echo')).toBe(200);
  }
  expect((stack.provider.counters.grants.refresh_token ?? 0) - grants).toBe(2);
  const latest = await tokensOfSession(stack.gateway, decodeURIComponent(second.cookie.split('=')[1] as string));
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
  // The second session's new set is written again there: her next refresh spends the refresh token the
  // provider holds valid, and she stays signed in.
  await eventually('the latest token set on the promoted replica', 30_000, async () => (await tokensOfSession(stack.gateway, decodeURIComponent(second.cookie.split('=')[1] as string)))?.accessToken === latest?.accessToken, { intervalMs: 200 });
  clock.advance((latest?.expiresAt as number) - Math.floor(clock.now() / 1000) + 1);
  expect(await statusWith(second.cookie, '/api/echo')).toBe(200);
  expect(await statusWith(second.cookie, '/auth/user')).toBe(200);
  expect((stack.provider.counters.grants.refresh_token ?? 0) - grants).toBe(3);
}, 150_000);
