/**
 * A refresh whose lock lapsed while its process was away from Redis (an outage longer than the
 * lock's 15 s TTL, or that one process cut off), with a provider that detects refresh-token
 * reuse (oidc-provider revokes the whole grant when a rotated refresh token comes back).
 *
 * Process A refreshes; the provider rotates the refresh token; A loses Redis before its
 * compare-and-set and keeps the set (unsaved-refreshes.ts). Its lock lapses (deleted here, as
 * its TTL would). Process B then serves the same session, takes the free lock, and used to
 * refresh at once with the refresh token A had spent: the provider revoked the grant, the set
 * A wrote a moment later included, and the user was signed out by a Redis outage (found by red
 * team). Now A's note (`refreshing:`) makes B wait for A's set, which A writes once it is back.
 *
 * Fails if, in src/session/refresh.ts asHolder, the `awaitUnwritten` step is skipped
 * (`if (spends)` → `if (false)` before it): B refreshes with the spent token, a second grant.
 */
import { isGrant } from '../../support/provider-front.js';
import { startRefreshStack, type RefreshStack } from '../../support/refresh-stack.js';
import { startTcpGate, type TcpGate } from '../../support/tcp-gate.js';
import { expectErrorBody, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';
import { digest } from '../../../src/redis/keys.js';

const csrf = { 'x-csrf': '1' };
let gate: TcpGate | undefined;
let stack: RefreshStack;

beforeAll(async () => {
  // A reaches Redis through a gate; B directly.
  stack = await startRefreshStack({ aRedisUrl: async (redisUrl) => (gate = await startTcpGate(redisUrl)).url });
});

afterAll(async () => {
  await stack?.close();
  await gate?.close();
});

it("waits for the set another process got and could not write, instead of spending the same refresh token: one grant, the grant alive, the user signed in", async () => {
  const { front, provider, a, b } = stack;
  const open = gate as TcpGate;
  const { client, cookie, before } = await stack.signedIn();
  const lock = b.runtime.keys.refreshLock(digest(sessionIdFromCookie(cookie)));

  // A refreshes; it loses Redis while the provider answers (rotating the refresh token).
  stack.expire(before);
  let grants = 0;
  front.intercept((req) => {
    if (isGrant(req, 'refresh_token') && ++grants === 1) open.shut();
    return undefined;
  });
  expectErrorBody(await client.get(`${a.url}/api/echo`, { headers: csrf }), 'session_store_unavailable', 503);
  // A's lock lapses, as it would in an outage longer than its TTL.
  await b.runtime.redis.del(lock);

  // B gets the session's next call; once it holds the lock, A's path to Redis comes back.
  const onB = client.get(`${b.url}/api/echo`, { headers: csrf });
  await eventually('B to take the lapsed lock', 10_000, async () => (await b.runtime.redis.exists(lock)) === 1 || undefined);
  open.open();
  expect((await onB).status).toBe(200);

  expect(grants).toBe(1);
  const kept = await tokensOfSession(b, cookie);
  expect(kept?.refreshToken).not.toBe(before.refreshToken);
  expect((await provider.introspect(kept?.refreshToken as string)).active).toBe(true);
  // And the next refresh, with the token A got, works.
  front.intercept(undefined);
  stack.expire(kept as NonNullable<typeof kept>);
  expect((await client.get(`${b.url}/api/echo`, { headers: csrf })).status).toBe(200);
  expect((await tokensOfSession(b, cookie))?.refreshToken).not.toBe(kept?.refreshToken);
}, 60_000);
