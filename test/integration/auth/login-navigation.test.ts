/**
 * GET /auth/login starts a sign-in only for a navigation (src/http/login-navigation.ts): a
 * subresource or script request, or a frame of another origin, is refused before it spends the
 * address's login budget, takes a place under maxActiveLogins or sets a login cookie. Found by
 * red team: five `<img>` loads from any page (sameSite lax), or from a sibling subdomain (strict),
 * left the visitor's address with 429 on its own sign-in. The browser's side (Chromium's own
 * Fetch Metadata for an `<img>` and an `<iframe>`) is test/e2e/cross-site-sign-in.test.ts.
 *
 * Fails if, in src/http/auth-routes.ts, `if (refused) throw new GatewayError(...)` becomes
 * `if (false) ...`: the refused requests answer 302 and spend the budget; and, in
 * login-navigation.ts, if `headers['sec-fetch-site'] !== 'same-origin'` becomes `true`: the
 * gateway's own frame is refused; and if `if (mode !== undefined && mode !== 'navigate')` becomes
 * `if (false)`: an `<img>` of our own origin starts one.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { expectErrorBody } from '../../support/assertions.js';
import type { TestGateway } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';

const LIMIT = 5;
let stack: Stack;
let gw: TestGateway;

beforeAll(async () => {
  // Lax: the bounce (strict only) does not stand in front of the cases judged here.
  stack = await startStack({ config: { session: { sameSite: 'lax' }, rateLimit: { loginPerMinute: LIMIT } } });
  gw = stack.gateway;
});
afterAll(() => stack?.close());

const activeLogins = async () => (await gw.runtime.transactions.load()).active;
const freshRateWindow = async () => {
  for (const key of await gw.runtime.redis.keys(`${gw.config.redis.keyPrefix}rl:*`)) await gw.runtime.redis.del(key);
};
const metadata = (site: string, mode: string, dest: string) => ({ 'sec-fetch-site': site, 'sec-fetch-mode': mode, 'sec-fetch-dest': dest });
const start = (headers: Record<string, string>) => new BrowserClient().get(`${gw.url}/auth/login?returnTo=/x`, { headers });

const refused: [string, Record<string, string>][] = [
  ['an <img> from another site', metadata('cross-site', 'no-cors', 'image')],
  ['an <img> from a sibling subdomain', metadata('same-site', 'no-cors', 'image')],
  ['an <img> of our own origin', metadata('same-origin', 'no-cors', 'image')],
  ['a fetch() from another site', metadata('cross-site', 'cors', 'empty')],
  ['a <script> from another site', metadata('cross-site', 'no-cors', 'script')],
  ['a frame of another site', metadata('cross-site', 'navigate', 'iframe')],
  ['a frame of a sibling subdomain', metadata('same-site', 'navigate', 'iframe')],
  ['an <embed> of another site', metadata('cross-site', 'navigate', 'embed')],
  ['a mode spelt twice', { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate, navigate', 'sec-fetch-dest': 'document' }],
];

it.each(refused)('%s is refused (400) with nothing spent, set or stored', async (_, headers) => {
  await freshRateWindow();
  const before = await activeLogins();
  for (let i = 0; i < LIMIT + 1; i += 1) {
    const res = await start(headers);
    expectErrorBody(res, 'invalid_request', 400);
    expect(res.headers.get('set-cookie')).toBeNull();
  }
  expect(await activeLogins()).toBe(before);
  // The address's whole budget is still there: its own sign-in starts.
  expect((await start(metadata('same-origin', 'navigate', 'document'))).status).toBe(302);
});

const started: [string, Record<string, string>][] = [
  ['a navigation from our own page', metadata('same-origin', 'navigate', 'document')],
  ['a typed URL or bookmark', metadata('none', 'navigate', 'document')],
  ['a link on another site (lax: no bounce)', metadata('cross-site', 'navigate', 'document')],
  ['a frame of our own origin', metadata('same-origin', 'navigate', 'iframe')],
  ['a browser that sends no Fetch Metadata', {}],
  // Node's fetch sends `Sec-Fetch-Mode: cors` on every request, and no Sec-Fetch-Site.
  ['a client that sends a mode without a site', { 'sec-fetch-mode': 'cors' }],
];

it.each(started)('%s starts a sign-in', async (_, headers) => {
  await freshRateWindow();
  const before = await activeLogins();
  const res = await start(headers);
  expect(res.status).toBe(302);
  expect(res.headers.get('location')).toContain(gw.config.oidc.issuer.replace(/\/$/, ''));
  expect(await activeLogins()).toBe(before + 1);
});
