/**
 * Sentinel failover during traffic (SPEC §7): a master, a replica and a sentinel (real
 * redis-server processes); a signed-in browser keeps calling a proxied route while the master
 * is killed and the sentinel promotes the replica. The session survives (same cookie, same
 * tokens), calls resume within a bound (the gap is measured and printed), and during the switch
 * no call gets anything but 200 or 503 session_store_unavailable: never a 500, never a 401, and
 * the session cookie is never cleared. (Sign-in, refresh and logout through a sentinel without a
 * failover: sentinel.test.ts.)
 *
 * Replication is asynchronous, so before the kill the test makes it explicit: WAIT on the
 * master for the replica's acknowledgement, then reads the session key on the replica.
 *
 * Mutation checks (each done by hand once, in a throwaway worktree):
 *   - src/redis/errors.ts, storeUnavailable: `new GatewayError('login_required', { cause })`
 *     instead of session_store_unavailable (a Redis failure signs out): the calls during the
 *     switch answer 401 login_required and this test fails.
 *   - src/redis/client.ts: `retryStrategy: () => null` (never reconnect): Sentinel promotes the
 *     replica but the gateway answers 503 until the bound, and this test fails.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startRedisSentinel, type RedisSentinelSet } from '../../support/redis-sentinel.js';
import type { RedisServer } from '../../support/redis-server.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
/** Sentinel's own timings, short so that the failover fits a test. */
const DOWN_AFTER_MS = 1_000;
const FAILOVER_TIMEOUT_MS = 10_000;
/** How long calls may fail after the kill before the test calls it a failure. */
const RESUME_BOUND_MS = 30_000;
const MAX_CALLS = 3_000;
/** After the promotion, this many 200s in a row end the loop. */
const STEADY_CALLS = 5;

let sentinel: RedisSentinelSet;
let master: RedisServer;
let replica: RedisServer;
let upstream: Upstream;
let stack: Stack;

beforeAll(async () => {
  sentinel = await startRedisSentinel({ downAfterMs: DOWN_AFTER_MS, failoverTimeoutMs: FAILOVER_TIMEOUT_MS });
  master = sentinel.master;
  replica = sentinel.replica as RedisServer;
  upstream = await startUpstream();
  stack = await startStack({
    config: {
      redis: { url: undefined, sentinel: { name: sentinel.name, nodes: sentinel.nodes } },
      routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
    },
  });
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
  await sentinel?.close();
});

interface Outcome {
  startedAt: number;
  endedAt: number;
  /** HTTP status, or 0 when the call got no answer at all. */
  status: number;
  error: string | undefined;
  bearer: string | undefined;
  clearsCookie: boolean;
}

it('keeps the session through a failover during traffic: only 503 session_store_unavailable in the gap, then 200 again with the same cookie and tokens', async () => {
  const client = new BrowserClient({ timeoutMs: 10_000 });
  await signIn(client, stack.gateway.url);
  const cookieName = stack.config.derived.sessionCookieName;
  const cookie = client.cookies(stack.gateway.url)[cookieName];
  expect(cookie).toBeDefined();

  const call = async (): Promise<Outcome> => {
    const startedAt = performance.now();
    const res = await client.get(`${stack.gateway.url}/api/echo`, { headers: csrf }).catch((err: Error) => err);
    const endedAt = performance.now();
    if (res instanceof Error) return { startedAt, endedAt, status: 0, error: res.message, bearer: undefined, clearsCookie: false };
    const body = res.text.startsWith('{') ? (JSON.parse(res.text) as { error?: string; headers?: { authorization?: string } }) : {};
    const clearsCookie = res.headers.getSetCookie().some((c) => c.startsWith(`${cookieName}=`));
    return { startedAt, endedAt, status: res.status, error: body.error, bearer: body.headers?.authorization, clearsCookie };
  };

  const before = await call();
  expect(before.status).toBe(200);
  const bearer = before.bearer;
  expect(bearer).toMatch(/^Bearer /);

  // The sync point: the replica has acknowledged every write so far (the session included).
  await sentinel.waitForReplica(master);
  expect((await replica.keys(`${stack.config.redis.keyPrefix}sess:*`)).length).toBeGreaterThan(0);

  // Traffic, then the kill while it runs.
  const outcomes: Outcome[] = [];
  let killedAt: number | undefined;
  let promotedAt: number | undefined;
  const traffic = (async () => {
    for (let i = 0; i < MAX_CALLS; i++) {
      const outcome = await call();
      outcomes.push(outcome);
      if (killedAt !== undefined && performance.now() - killedAt > RESUME_BOUND_MS) return;
      const sincePromotion = promotedAt === undefined ? [] : outcomes.filter((o) => o.startedAt > (promotedAt as number));
      if (sincePromotion.length >= STEADY_CALLS && sincePromotion.slice(-STEADY_CALLS).every((o) => o.status === 200)) return;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  await eventually('traffic flowing before the kill', 10_000, () => outcomes.filter((o) => o.status === 200).length >= 3, { intervalMs: 100 });
  await master.stop();
  killedAt = performance.now();
  await sentinel.waitForMaster(replica, RESUME_BOUND_MS);
  promotedAt = performance.now();
  await traffic;

  const afterKill = outcomes.filter((o) => o.startedAt > (killedAt as number));
  const firstOkAfterKill = afterKill.find((o) => o.status === 200);
  const failed = outcomes.filter((o) => o.status !== 200);
  const gapMs = firstOkAfterKill ? Math.round(firstOkAfterKill.endedAt - (killedAt as number)) : undefined;
  const tally = Object.fromEntries([...new Set(outcomes.map((o) => `${o.status} ${o.error ?? ''}`.trim()))].map((k) => [k, outcomes.filter((o) => `${o.status} ${o.error ?? ''}`.trim() === k).length]));
  console.log(
    `sentinel failover: promoted ${Math.round((promotedAt as number) - (killedAt as number))} ms after the kill (down-after ${DOWN_AFTER_MS} ms); ` +
      `first 200 ${gapMs ?? 'never'} ms after the kill; ${outcomes.length} calls: ${JSON.stringify(tally)}`,
  );

  // Only 200 or a clean 503 session_store_unavailable, never a sign-out.
  for (const o of failed) expect({ status: o.status, error: o.error }).toEqual({ status: 503, error: 'session_store_unavailable' });
  expect(outcomes.some((o) => o.clearsCookie)).toBe(false);
  // Calls resumed, within the bound, with the same session and the same tokens.
  expect(gapMs).toBeDefined();
  expect(gapMs as number).toBeLessThan(RESUME_BOUND_MS);
  expect(outcomes.slice(-STEADY_CALLS).every((o) => o.status === 200)).toBe(true);
  expect(new Set(outcomes.filter((o) => o.status === 200).map((o) => o.bearer))).toEqual(new Set([bearer]));
  expect(client.cookies(stack.gateway.url)[cookieName]).toBe(cookie);
  expect((await client.get(`${stack.gateway.url}/auth/user`, { headers: csrf })).status).toBe(200);
}, 90_000);
