/**
 * GET /auth/login reached by a cross-site navigation without the (SameSite=Strict) session
 * cookie goes round once through a page of the gateway's own (src/http/login-bounce.ts; the
 * browser side is test/e2e/cross-site-sign-in.test.ts). What that page is, and that every check
 * of /auth/login still applies exactly once: parameters refused on the first arrival, the rate
 * limit and the transaction only on the real start.
 *
 * Fails if, in src/http/login-bounce.ts, `if (!strict || sessionCookieSent || guarded) return false;`
 * becomes `if (true) return false;` (no bounce: the first arrival is a 302 to the provider);
 * and the last test fails if `|| guarded` is dropped from it (the refresh, called cross-site
 * again, is sent round forever).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { createTestClock, type TestGateway } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { expectErrorBody } from '../../support/assertions.js';
import { signIn } from '../../support/drive-login.js';

const LIMIT = 6;
const clock = createTestClock();
let stack: Stack;
let gw: TestGateway;

beforeAll(async () => {
  stack = await startStack({ clock, config: { rateLimit: { loginPerMinute: LIMIT } } });
  gw = stack.gateway;
});

afterAll(() => stack?.close());

/** Sec-Fetch-Site: cross-site, and only the cookies a cross-site navigation carries. */
const fromOtherSite = { crossSite: true } as const;
const guardName = () => `${gw.config.derived.loginCookieName}.bounce`;
const refreshTarget = (html: string) => /<meta http-equiv="refresh" content="0;url=([^"]*)">/.exec(html)?.[1];
const unescapeAttribute = (value: string) => value.replace(/&amp;/g, '&');
const activeLogins = async () => (await gw.runtime.transactions.load()).active;
/** A new rate-limit window for every address (windows run on Redis's clock, from their first hit). */
const freshRateWindow = async () => {
  for (const key of await gw.runtime.redis.keys(`${gw.config.redis.keyPrefix}rl:*`)) await gw.runtime.redis.del(key);
};

describe('a sign-in started from another site', () => {
  it('is answered with a same-origin page that asks for the same sign-in, written from the parsed query', async () => {
    const client = new BrowserClient();
    const before = await activeLogins();
    const res = await client.get(`${gw.url}/auth/login?max_age=0&prompt=login%20login&returnTo=${encodeURIComponent('/a"><b>?q=1&r=2')}`, fromOtherSite);

    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-store');
    // The gateway's own headers (helmet): no inline script, no framing, no referrer.
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'self'");
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('location')).toBeNull();
    expect(res.text).not.toContain('<b>');
    expect(res.text).not.toContain('<script');

    const target = refreshTarget(res.text);
    expect(target).toBeDefined();
    // Canonical: a known order, the duplicate prompt dropped, everything percent-encoded, and
    // the nonce of this bounce, which the guard cookie holds.
    const nonce = client.cookies(gw.url)[guardName()] as string;
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(unescapeAttribute(target as string)).toBe(`/auth/login?returnTo=%2Fa%22%3E%3Cb%3E%3Fq%3D1%26r%3D2&prompt=login&max_age=0&bounce=${nonce}`);
    expect(res.text).toContain(`<a href="${target}">`);
    // No transaction, no login cookie: only the guard.
    expect(await activeLogins()).toBe(before);
    expect(Object.keys(client.cookies(gw.url))).toEqual([guardName()]);
  });

  it('refuses a bad parameter on the first arrival already', async () => {
    const client = new BrowserClient();
    const accept = { ...fromOtherSite, headers: { accept: 'application/json' } };
    expectErrorBody(await client.get(`${gw.url}/auth/login?returnTo=//evil.example`, accept), 'invalid_return_to', 400);
    expectErrorBody(await client.get(`${gw.url}/auth/login?returnTo=/x&bounce=1`, accept), 'invalid_request', 400);
    expect(client.cookies(gw.url)[guardName()]).toBeUndefined();
  });

  it('is not sent round when the session cookie came, nor for a typed URL or a same-site start', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    // A session cookie set SameSite=Lax by hand: sent cross-site, so nothing to go round for.
    const session = client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
    const lax = new BrowserClient();
    lax.setCookie(gw.url, gw.config.derived.sessionCookieName, session, { sameSite: 'lax' });
    expect((await lax.get(`${gw.url}/auth/login`, fromOtherSite)).status).toBe(302);
    for (const site of ['none', 'same-site', 'same-origin']) {
      const res = await new BrowserClient().get(`${gw.url}/auth/login`, { headers: { 'sec-fetch-site': site, 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' } });
      expect(res.status).toBe(302);
    }
  });

  it('starts on the second arrival, once: the guard is cleared and the rate limit counts it then', async () => {
    // A fresh window (the tests above started sign-ins of their own).
    await freshRateWindow();
    // The bounces themselves count for nothing: well past the limit of them...
    for (let i = 0; i < LIMIT + 2; i++) {
      const bounced = await new BrowserClient().get(`${gw.url}/auth/login?returnTo=/x`, fromOtherSite);
      expect(bounced.status).toBe(200);
    }
    // ...and the real starts are still all allowed.
    for (let i = 0; i < LIMIT; i++) {
      const client = new BrowserClient();
      const first = await client.get(`${gw.url}/auth/login?returnTo=/x`, fromOtherSite);
      const target = unescapeAttribute(refreshTarget(first.text) as string);
      // A browser that calls the refresh cross-site again (withholding the Strict cookie) is not sent round twice.
      const second = await client.get(new URL(target, gw.url), fromOtherSite);
      expect(second.status).toBe(302);
      expect(new URL(second.redirectUrl as string).origin).toBe(new URL(stack.provider.issuer).origin);
      expect(client.cookies(gw.url)[guardName()]).toBeUndefined();
    }
    expectErrorBody(await new BrowserClient().get(`${gw.url}/auth/login`, { headers: { accept: 'application/json' } }), 'rate_limited', 429);
  });

  // Fails if, in auth-routes.ts clearLoginCookiesIfMany, `&& name !== guard` is dropped: the
  // guard counted as a sixth sign-in in progress, and the four pending ones were cleared.
  it('does not count its guard among the sign-ins in progress', async () => {
    await freshRateWindow();
    const client = new BrowserClient();
    const pending = () => Object.keys(client.cookies(gw.url)).filter((n) => n.startsWith(`${gw.config.derived.loginCookieName}.`) && n !== guardName());
    for (let i = 0; i < 4; i++) expect((await client.get(`${gw.url}/auth/login?returnTo=/x`)).status).toBe(302);
    expect(pending()).toHaveLength(4);
    const first = await client.get(`${gw.url}/auth/login?returnTo=/x`, fromOtherSite);
    expect(first.status).toBe(200);
    const second = await client.get(new URL(unescapeAttribute(refreshTarget(first.text) as string), gw.url), fromOtherSite);
    expect(second.status).toBe(302);
    expect(pending()).toHaveLength(5);
  });
});

// Fails if, in src/http/login-bounce.ts, any guard lets an arrival through again (`const guarded
// = guard !== undefined && guard === query.bounce;` → `= guard !== undefined;`): a page that
// sent the browser to /auth/login twice (found by red team) started a sign-in without the
// Strict cookie, which noted nothing, and the session the browser held lived on.
describe('a sign-in started from another site twice', () => {
  it('is sent round each time: only the arrival of the page\'s own nonce is let through without the session cookie', async () => {
    // A fresh rate-limit window (the tests above used theirs up).
    await freshRateWindow();
    const client = new BrowserClient();
    await signIn(client, gw.url);
    const first = await client.get(`${gw.url}/auth/login`, fromOtherSite);
    expect(first.status).toBe(200);
    // The other site's second navigation: no nonce, or a made-up one.
    const second = await client.get(`${gw.url}/auth/login`, fromOtherSite);
    expect(second.status).toBe(200);
    const madeUp = await client.get(`${gw.url}/auth/login?bounce=${'A'.repeat(22)}`, fromOtherSite);
    expect(madeUp.status).toBe(200);
    // The page's own refresh, called cross-site by a browser that withholds the Strict cookie,
    // is let through once; as the same-origin navigation browsers make, it carries the cookie.
    const target = unescapeAttribute(refreshTarget(madeUp.text) as string);
    expect((await client.get(new URL(target, gw.url), fromOtherSite)).status).toBe(302);
    expect(client.cookies(gw.url)[guardName()]).toBeUndefined();
  });
});
