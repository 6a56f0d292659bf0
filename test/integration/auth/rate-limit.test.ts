/**
 * Login start is rate-limited per client address, in Redis, so that every gateway process
 * shares the count and a flood cannot fill Redis with login transactions (SPEC §7).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { createTestClock, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { expectErrorBody } from '../../support/assertions.js';
import { dumpRedis } from '../../support/redis-dump.js';

const LIMIT = 5;
// Both gateways run on a clock set one second into a fresh minute: the fixed one-minute window
// cannot roll over during the test, so the count is exact. Two per-process counters would let
// 2 x LIMIT through; one shared counter lets exactly LIMIT through.
const clock = createTestClock();
let stack: Stack;
let gw: TestGateway;
let gw2: TestGateway;

beforeAll(async () => {
  clock.advance(60 - ((clock.now() / 1000) % 60) + 1);
  stack = await startStack({ clock, config: { rateLimit: { loginPerMinute: LIMIT } } });
  gw = stack.gateway;
  gw2 = await startTestGateway(stack.config, undefined, { clock });
});

afterAll(async () => {
  await gw2?.close();
  await stack?.close();
});

it('answers 429 rate_limited with Retry-After once an address passes the limit, counted across processes', async () => {
  const client = new BrowserClient();
  let accepted = 0;
  let limited;
  for (let i = 0; i < 2 * LIMIT + 2 && !limited; i++) {
    const res = await client.get(`${(i % 2 ? gw : gw2).url}/auth/login`, { headers: { accept: 'application/json' } });
    if (res.status === 302) accepted += 1;
    else limited = res;
  }
  // Mutation check: key the counter per process (e.g. add `${process.pid}${Math.random()}` to
  // the key in createLoginLimiter, as a second process would have its own): accepted becomes 10
  // (checked by hand).
  expect(accepted).toBe(LIMIT);
  expect(limited).toBeDefined();
  expectErrorBody(limited as NonNullable<typeof limited>, 'rate_limited', 429);
  const retryAfter = Number(limited?.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);

  // No login transaction was stored for the refused attempt.
  const transactions = await dumpRedis(gw.config.redis.url as string, `${gw.config.redis.keyPrefix}tx:*`);
  expect(transactions).toHaveLength(accepted);
});
