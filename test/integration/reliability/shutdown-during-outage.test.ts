/**
 * A process stopped (a rolling deploy) while Redis is down, holding a token set the provider
 * issued and Redis did not take: its rotated refresh token is the only valid one. close() gave
 * it one last write, which failed, and dropped it; once Redis was back, the next refresh (on
 * any instance) spent the old token, and the provider revoked the grant (found by red team).
 * Now close() tries again every second within its budget (session/refresh.ts closeWaitMs), so
 * a Redis that comes back meanwhile takes the set.
 *
 * Fails if, in src/session/refresh.ts close, the unsaved sets get no budget (`unsaved.close(0)`):
 * the set is given up, the record keeps the spent refresh token.
 */
import { isGrant } from '../../support/provider-front.js';
import { startRefreshStack, type RefreshStack } from '../../support/refresh-stack.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';

const csrf = { 'x-csrf': '1' };
let stack: RefreshStack;

beforeAll(async () => {
  stack = await startRefreshStack({ appendOnly: true });
});

afterAll(() => stack?.close());

it('writes the set it kept once Redis is back within its shutdown budget: the session goes on, one grant', async () => {
  const { front, redis, provider, a, b } = stack;
  const { client, cookie, before } = await stack.signedIn();
  stack.expire(before);
  let grants = 0;
  front.intercept(async (req) => {
    if (isGrant(req, 'refresh_token') && ++grants === 1) await redis.stop();
    return undefined;
  });
  expectErrorBody(await client.get(`${a.url}/api/echo`, { headers: csrf }), 'session_store_unavailable', 503);

  // Stopped while Redis is down; Redis comes back while it closes.
  const closing = stack.closeA();
  await redis.start();
  await closing;

  const kept = await tokensOfSession(b, cookie);
  expect(kept?.refreshToken).not.toBe(before.refreshToken);
  expect((await provider.introspect(kept?.refreshToken as string)).active).toBe(true);
  front.intercept(undefined);
  expect((await client.get(`${b.url}/api/echo`, { headers: csrf })).status).toBe(200);
  expect(grants).toBe(1);
}, 60_000);
