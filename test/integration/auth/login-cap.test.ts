/**
 * The global cap on logins in progress (rateLimit.maxActiveLogins): however many client
 * addresses a flood comes from, Redis never holds more login transactions than the cap; above
 * it /auth/login answers 429 rate_limited with Retry-After, and a finished login frees a slot.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { completeAtProvider } from '../../support/drive-login.js';
import { expectErrorBody } from '../../support/assertions.js';
import { startStack, type Stack } from '../../support/stack.js';
import type { TestGateway } from '../../support/gateway.js';

const CAP = 3;
let stack: Stack;
let gw: TestGateway;

beforeAll(async () => {
  stack = await startStack({ config: { rateLimit: { loginPerMinute: 100, maxActiveLogins: CAP } } });
  gw = stack.gateway;
});

afterAll(() => stack?.close());

it('refuses logins above the cap with 429 and Retry-After, stores nothing for them, and admits again once one ends', async () => {
  const started = [];
  for (let i = 0; i < CAP; i += 1) {
    const client = new BrowserClient();
    const res = await client.get(`${gw.url}/auth/login`);
    expect(res.status).toBe(302);
    started.push({ client, authorizeUrl: res.redirectUrl as string });
  }

  const refused = await new BrowserClient().get(`${gw.url}/auth/login`, { headers: { accept: 'application/json' } });
  expectErrorBody(refused, 'rate_limited', 429);
  const retryAfter = Number(refused.headers.get('retry-after'));
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(600);
  expect(refused.headers.getSetCookie()).toEqual([]);
  expect(await gw.runtime.transactions.active()).toBe(CAP);

  // One of the logins finishes: its transaction is taken, and a new login fits again.
  const first = started[0] as { client: BrowserClient; authorizeUrl: string };
  const callback = await first.client.get(await completeAtProvider(first.client, first.authorizeUrl));
  expect(callback.status).toBe(302);
  expect(await gw.runtime.transactions.active()).toBe(CAP - 1);
  expect((await new BrowserClient().get(`${gw.url}/auth/login`)).status).toBe(302);
});
