/**
 * Login start is rate-limited per client address, in Redis, so that every gateway process
 * shares the count and a flood cannot fill Redis with login transactions (SPEC §7).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { expectErrorBody } from '../../support/assertions.js';
import { dumpRedis } from '../../support/redis-dump.js';

let stack: Stack;
let gw: TestGateway;
let gw2: TestGateway;

beforeAll(async () => {
  stack = await startStack({ config: { rateLimit: { loginPerMinute: 5 } } });
  gw = stack.gateway;
  gw2 = await startTestGateway(stack.config);
});

afterAll(async () => {
  await gw2?.close();
  await stack?.close();
});

it('answers 429 rate_limited with Retry-After once an address passes the limit, counted across processes', async () => {
  const client = new BrowserClient();
  let accepted = 0;
  let limited;
  // A fixed one-minute window: if the run straddles a minute boundary, up to two windows' worth
  // pass before the first refusal.
  for (let i = 0; i < 12 && !limited; i++) {
    const res = await client.get(`${(i % 2 ? gw : gw2).url}/auth/login`, { headers: { accept: 'application/json' } });
    if (res.status === 302) accepted += 1;
    else limited = res;
  }
  expect(accepted).toBeGreaterThanOrEqual(5);
  expect(accepted).toBeLessThanOrEqual(10);
  expect(limited).toBeDefined();
  expectErrorBody(limited as NonNullable<typeof limited>, 'rate_limited', 429);
  const retryAfter = Number(limited?.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);

  // No login transaction was stored for the refused attempt.
  const transactions = await dumpRedis(gw.config.redis.url as string, `${gw.config.redis.keyPrefix}tx:*`);
  expect(transactions).toHaveLength(accepted);
});
