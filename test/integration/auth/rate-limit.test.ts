/**
 * Login start is rate-limited per client address, in Redis, so that every gateway process
 * shares the count and a flood cannot fill Redis with login transactions (SPEC §7).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { expectErrorBody } from '../../support/assertions.js';
import { dumpRedis } from '../../support/redis-dump.js';

let provider: TestProvider;
let gw: TestGateway;
let gw2: TestGateway;

beforeAll(async () => {
  const reserved = await reserveServer();
  provider = await startTestProvider({ clients: [gatewayClient(reserved.url)] });
  const config = buildTestConfig({ issuer: provider.issuer, publicUrl: reserved.url, rateLimit: { loginPerMinute: 5 } });
  gw = await startTestGateway(config, reserved);
  gw2 = await startTestGateway(config);
});

afterAll(async () => {
  await gw2?.close();
  await gw?.close();
  await provider?.close();
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
