/**
 * A hostile (compromised) upstream's redirects, followed by the SPA's own fetch (red team:
 * hostile upstream). In Chromium, real gateway, real provider, real Redis, two real upstreams.
 *
 * The gateway's CSRF defence is a static header (`x-csrf: 1`) that only the SPA's own calls
 * carry. A fetch follows redirects by itself, and the Fetch standard keeps the request's headers
 * on a same-origin redirect (307 and 308 keep the method and the body too). The gateway passes an
 * upstream's Location on its own origin as sent (location.ts), and makes one naming another
 * route's upstream that route's URL. So any one upstream can direct the SPA's call, CSRF header,
 * session cookie and body included, at any other route (which then gets *its* token, which the
 * hostile upstream never holds: resource indicators and token exchange exist so that one API
 * cannot act at another with the user's authority) or at the gateway's own endpoints: a POST the
 * upstream answers `307 Location: /auth/logout` signed the user out and revoked their grant.
 * Since 0.6.9 location.ts drops a Location naming a gateway endpoint, and one the browser would
 * repeat with a method other than GET or HEAD on another route. Fails if location.ts passes a
 * same-origin Location unjudged (`return refused === undefined ? location : drop(refused)` →
 * `return location`).
 *
 * The page's context bypasses CSP only because the test runs over http: helmet's
 * `upgrade-insecure-requests` upgrades the redirect target to https here, which on an https
 * publicUrl changes nothing.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { browserSuite, CLOSE_BROWSER_MS, closeWithin, launchChromium, WAIT_MS } from '../support/chromium.js';
import { startStack, type Stack } from '../support/stack.js';
import { startUpstream, type Upstream } from '../support/upstream.js';
import { contextWith, pageFetch, sessionOf } from '../support/foreign-pages.js';

const run = browserSuite('test/e2e/hostile-upstream-redirects.test.ts');

let stack: Stack;
/** The compromised API, behind /api/weather. */
let weather: Upstream;
/** Another API, behind /api/payments, that the weather API must not be able to act at. */
let payments: Upstream;
let browser: Browser | undefined;
let context: BrowserContext | undefined;
/** What the weather API answers every call with. */
let redirect = { status: 307, location: '/' };

run("a hostile upstream's redirects, followed by the SPA's fetch", () => {
  beforeAll(async () => {
    weather = await startUpstream();
    payments = await startUpstream();
    weather.setHandler((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      res.writeHead(redirect.status, { location: redirect.location, 'content-length': '0' });
      res.end();
    });
    stack = await startStack({
      config: {
        routes: [
          { path: '/api/weather', target: weather.url, auth: 'user' },
          { path: '/api/payments', target: payments.url, auth: 'user' },
        ],
      },
    });
    browser = await launchChromium();
  }, 60_000);
  afterEach(async () => {
    await context?.close().catch(() => undefined);
    context = undefined;
  });
  afterAll(async () => {
    await closeWithin(browser, CLOSE_BROWSER_MS);
    await stack?.close();
    await weather?.close();
    await payments?.close();
  }, 30_000);

  /** Alice's SPA: a page of the gateway's origin, signed in. */
  async function spa(): Promise<Page> {
    context = await contextWith(browser as Browser, stack, await sessionOf(stack, 'alice'), { bypassCSP: true });
    const page = await context.newPage();
    await page.goto(`${stack.gateway.url}/auth/no-such-page`);
    return page;
  }

  /** The SPA posts a note to the weather API, as it does every call. */
  const postNote = (page: Page) =>
    pageFetch(page, `${stack.gateway.url}/api/weather/notes`, {
      method: 'POST',
      headers: { 'x-csrf': '1', 'content-type': 'application/json' },
      body: '{"note":"rain tomorrow"}',
    }).catch((err: unknown) => ({ status: 0, body: String(err) }));

  it('cannot sign the user out: a POST answered 307 Location: /auth/logout leaves the session signed in', async () => {
    const page = await spa();
    expect((await pageFetch(page, `${stack.gateway.url}/auth/user`, { headers: { 'x-csrf': '1' } })).status).toBe(200);
    redirect = { status: 307, location: '/auth/logout' };
    await postNote(page);
    // Observed: the browser POSTed /auth/logout with the CSRF header, the session was ended and its
    // grant revoked (the SPA's fetch even got the logoutUrl, ID token included): 401 here.
    expect((await pageFetch(page, `${stack.gateway.url}/auth/user`, { headers: { 'x-csrf': '1' } })).status).toBe(200);
  }, 6 * WAIT_MS);

  it("cannot make the browser call another route with that route's token: a POST answered 307 to /api/payments never reaches it", async () => {
    const page = await spa();
    payments.reset();
    redirect = { status: 307, location: '/api/payments/transfer?to=mallory&amount=1000' };
    await postNote(page);
    // Observed: POST /api/payments/transfer?to=mallory&amount=1000 with the SPA's body, x-csrf: 1
    // and the payments route's Bearer token (a GET answered 302 there does the same, as a GET).
    expect(payments.requests.map((r) => `${r.method} ${r.url}`)).toEqual([]);
  }, 6 * WAIT_MS);
});
