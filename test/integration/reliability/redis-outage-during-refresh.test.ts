/**
 * Redis fails *during* a refresh (issue 14; SPEC §7 "a Redis error never ends a session"): the
 * provider has answered the refresh grant (rotating the refresh token) but Redis dies before
 * the gateway's compare-and-set, and comes back (append-only file: the session survives).
 * (A SIGSTOP-paused Redis would not do: the timed-out write still sits in its socket and is
 * applied on resume.) 0.3.0 dropped the new token set: the session kept the old
 * refresh token, which the provider no longer honours, so the next refresh (on any instance)
 * got invalid_grant and signed the user out because Redis had hiccupped.
 *
 * Now the call answers 503 session_store_unavailable, the issued set is kept by the process
 * that got it and written as soon as Redis answers again, and the session goes on with the new
 * tokens on every instance, with no second refresh grant at the provider.
 *
 * Mutation check: in src/session/refresh.ts asHolder, drop `unsaved.keep(digest, seen.version,
 * next, held.lock);` → the record never moves to the new set, and the other instance's call
 * fails (502, then a refresh with the spent token).
 */
import { isGrant } from '../../support/provider-front.js';
import { startRefreshStack, type RefreshStack } from '../../support/refresh-stack.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
let stack: RefreshStack;

beforeAll(async () => {
  stack = await startRefreshStack({ appendOnly: true });
});

afterAll(() => stack?.close());

it('keeps the rotated tokens the provider issued while Redis was down, writes them once it is back, and the session goes on everywhere', async () => {
  const { front, redis, provider, upstream, a: gw, b: gw2 } = stack;
  const { client, cookie, before } = await stack.signedIn();
  const cookieName = gw.config.derived.sessionCookieName;

  // 1. The access token expires; Redis dies the moment the refresh grant arrives at the
  //    provider, which then answers it (rotating the refresh token).
  stack.expire(before);
  let stalled = false;
  front.intercept(async (req) => {
    if (!stalled && isGrant(req, 'refresh_token')) {
      stalled = true;
      await redis.stop();
    }
    return undefined;
  });
  const grantsBefore = provider.counters.grants.refresh_token ?? 0;
  const during = await client.get(`${gw.url}/api/echo`, { headers: csrf });
  expect(stalled).toBe(true);
  expectErrorBody(during, 'session_store_unavailable', 503);
  expect(during.headers.getSetCookie().filter((c) => c.startsWith(`${cookieName}=`))).toEqual([]);
  expect(provider.counters.grants.refresh_token ?? 0).toBe(grantsBefore + 1);

  // 2. Redis is back: the kept set is written without anyone asking (background retry).
  front.intercept(undefined);
  await redis.start();
  const after = await eventually('the issued token set to reach Redis', 10_000, async () => {
    const tokens = await tokensOfSession(gw, cookie);
    return tokens && tokens.refreshToken !== before.refreshToken ? tokens : undefined;
  }, { ignoreErrors: true });
  expect(after.accessToken).not.toBe(before.accessToken);

  // 3. Another instance serves the session with those tokens; the provider saw one refresh.
  upstream.reset();
  const next = await client.get(`${gw2.url}/api/echo`, { headers: csrf });
  expect(next.status).toBe(200);
  expect(upstream.requests[0]?.headers.authorization).toBe(`Bearer ${after.accessToken}`);
  expect((await client.get(`${gw2.url}/auth/user`, { headers: csrf })).status).toBe(200);
  expect(provider.counters.grants.refresh_token ?? 0).toBe(grantsBefore + 1);
  expect((await provider.introspect(after.refreshToken as string)).active).toBe(true);
}, 60_000);
