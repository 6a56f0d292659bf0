/**
 * `auth: client` routes while Redis is down (found by the Redis red team): a client-credentials
 * token this process holds, due for renewal but not expired, is a usable token, and the call
 * needs no Redis at all. It answered 503 from the skew on, every client route of the process.
 *
 * Mutation check (by hand, once): src/proxy/client-token.ts obtain, the catch around attempt():
 * `if (serving) return serving.accessToken;` removed there: the test fails (503).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { createTestClock } from '../../support/gateway.js';
import { startOwnRedisStack, type OwnRedisStack } from '../../support/own-redis-stack.js';

const clock = createTestClock();
let stack: OwnRedisStack;

beforeAll(async () => {
  stack = await startOwnRedisStack({
    route: (target) => ({ path: '/service', target, auth: 'client' }),
    commandTimeoutMs: 500,
    client: { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] },
    clock,
  });
});

afterAll(() => stack?.close());

it('serves the client token it holds (due for renewal, not expired) while Redis is down', async () => {
  const { gw, upstream, redis } = stack;
  const client = new BrowserClient();
  expect((await client.get(`${gw.url}/service/echo`, { headers: { 'x-csrf': '1' } })).status).toBe(200);
  const first = upstream.requests.at(-1)?.headers.authorization;
  // 60 s token, 30 s skew: due for renewal from 30 s on, valid until 60 s.
  clock.advance(40);
  await redis.stop();
  try {
    const res = await client.get(`${gw.url}/service/echo`, { headers: { 'x-csrf': '1' } });
    expect(res.status).toBe(200);
    expect(upstream.requests.at(-1)?.headers.authorization).toBe(first);
  } finally {
    await redis.start();
  }
}, 30_000);
