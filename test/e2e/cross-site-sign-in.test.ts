/**
 * A sign-in started from another site ends the session the browser already holds, as one
 * started from the SPA does (README, "Sign-in while signed in"), in Debian's Chromium with the
 * default SameSite=Strict session cookie. The demo (config/default.yaml) is on
 * http://localhost:P; the other site is a plain page on http://127.0.0.1:Q, a different site,
 * whose link (or script) navigates to the gateway's /auth/login. That navigation, and the
 * provider's redirect back to the callback, come without the Strict cookie; the gateway
 * answers the first with a page of its own that asks for the same URL again, same-origin.
 *
 * Fails if, in src/http/login-bounce.ts, `if (!strict || sessionCookieSent || guarded) return false;`
 * becomes `if (true) return false;` (no bounce): every follow then leaves the previous session
 * alive, GET /auth/sessions lists three, and the first cookie still gets 200 from /auth/user.
 * The last test fails if, in src/http/auth-routes.ts, `if (refused) throw ...` becomes
 * `if (false) ...`: both get the bounce page (200).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { browserSuite, CLOSE_BROWSER_MS, CLOSE_CONTEXT_MS, closeWithin, firstVisible, launchChromium, signInAtDemoProvider, WAIT_MS } from '../support/chromium.js';
import { startDemoOnFreePorts, type RunningDemo } from '../support/demo.js';
import { eventually, withTimeout } from '../support/wait.js';

const run = browserSuite('test/e2e/cross-site-sign-in.test.ts');

let demo: RunningDemo;
let browser: Browser | undefined;
let context: BrowserContext | undefined;
let otherSite: Server | undefined;
let otherUrl: string;

/**
 * The other site: a link to the gateway's /auth/login and, at /go, the same by `location.href`;
 * at /embed, an `<img>` and an `<iframe>` of it.
 */
function startOtherSite(gatewayUrl: string): Promise<Server> {
  const loginUrl = `${gatewayUrl}/auth/login?returnTo=/x`;
  const server = createServer((req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    if (req.url === '/embed') {
      res.end(`<!doctype html><title>elsewhere</title><img src="${loginUrl}" alt=""><iframe src="${loginUrl}"></iframe>`);
      return;
    }
    const script = req.url === '/go' ? `<script>location.href = ${JSON.stringify(loginUrl)};</script>` : '';
    res.end(`<!doctype html><title>elsewhere</title><a id="go" href="${loginUrl}">Sign in there</a>${script}`);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

async function sessionCookie(): Promise<string> {
  const cookies = await withTimeout((context as BrowserContext).cookies(demo.url), WAIT_MS, 'the context cookies');
  const cookie = cookies.find((c) => c.name === demo.config.derived.sessionCookieName);
  if (!cookie) throw new Error('no session cookie');
  return `${cookie.name}=${cookie.value}`;
}

/** The gateway answered with this session cookie only (Node's fetch, no browser). */
function withCookie(path: string, cookie: string): Promise<Response> {
  return fetch(`${demo.url}${path}`, { headers: { cookie, 'x-csrf': '1', accept: 'application/json' } });
}

async function signInFromSpa(page: Page): Promise<void> {
  await page.goto(`${demo.url}/`);
  await page.getByTestId('sign-in').click();
  await signInAtDemoProvider(page, demo.idpUrl);
  await page.getByTestId('signed-in').waitFor({ state: 'visible' });
}

/** Through the provider (which may remember the user and skip its pages) back to /x. */
async function throughProvider(page: Page): Promise<void> {
  const back = page.waitForURL((url) => url.origin === demo.url && url.pathname === '/x', { waitUntil: 'commit', timeout: 3 * WAIT_MS });
  for (let step = 0; step < 3; step += 1) {
    const login = page.locator('input[name="login"]');
    const approve = page.getByRole('button', { name: 'Approve' });
    const next = await Promise.race([back.then(() => 'back' as const), firstVisible({ login, approve })]);
    if (next === 'back') break;
    if (next === 'login') {
      await login.fill('alice');
      await page.locator('input[name="password"]').fill('alice-password');
      await page.getByRole('button', { name: 'Sign in' }).click();
    } else {
      await approve.click();
    }
  }
  await back;
}

run('a sign-in started from another site (Chromium)', () => {
  beforeAll(async () => {
    demo = await startDemoOnFreePorts();
    otherSite = await startOtherSite(demo.url);
    otherUrl = `http://127.0.0.1:${(otherSite.address() as AddressInfo).port}`;
    browser = await launchChromium();
  }, 45_000);

  afterAll(async () => {
    await closeWithin(context, CLOSE_CONTEXT_MS);
    await closeWithin(browser, CLOSE_BROWSER_MS);
    await new Promise((resolve) => (otherSite ? otherSite.close(resolve) : resolve(undefined)));
    await demo?.stop();
  }, 40_000);

  it('ends the previous session each time, though the session cookie is SameSite=Strict', async () => {
    if (!browser) throw new Error('no browser');
    context = await withTimeout(browser.newContext(), WAIT_MS, 'a new browser context');
    context.setDefaultTimeout(WAIT_MS);
    context.setDefaultNavigationTimeout(WAIT_MS);
    const page = await context.newPage();
    // What each GET /auth/login carried (allHeaders: headers() leaves the cookie out).
    const logins: Promise<{ site: string | undefined; cookie: boolean }>[] = [];
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (url.origin !== demo.url || url.pathname !== '/auth/login') return;
      logins.push(
        request.allHeaders().then((headers) => ({
          site: headers['sec-fetch-site'],
          cookie: (headers.cookie ?? '').includes(`${demo.config.derived.sessionCookieName}=`),
        })),
      );
    });

    await signInFromSpa(page);
    const first = await sessionCookie();
    expect((await withCookie('/auth/user', first)).status).toBe(200);

    // Followed twice: once a link, once a script.
    await page.goto(`${otherUrl}/`);
    await page.locator('#go').click();
    await throughProvider(page);
    const second = await sessionCookie();
    await page.goto(`${otherUrl}/go`, { waitUntil: 'commit' });
    await throughProvider(page);
    const third = await sessionCookie();
    expect(new Set([first, second, third]).size).toBe(3);

    const sessions = (await (await withCookie('/auth/sessions', third)).json()) as { current: boolean }[];
    expect(sessions).toHaveLength(1);
    expect(sessions[0]?.current).toBe(true);
    expect((await withCookie('/auth/user', first)).status).toBe(401);
    expect((await withCookie('/auth/user', second)).status).toBe(401);
    expect((await withCookie('/auth/user', third)).status).toBe(200);

    // The SPA's own sign-in (same-origin, with the cookie) went straight on; each start from the
    // other site came without the cookie and went round once, same-origin, with it.
    const [, ...fromOtherSite] = await Promise.all(logins);
    expect(fromOtherSite).toEqual([
      { site: 'cross-site', cookie: false },
      { site: 'same-origin', cookie: true },
      { site: 'cross-site', cookie: false },
      { site: 'same-origin', cookie: true },
    ]);
  }, 12 * WAIT_MS);

  // Found by red team: an <img> on any page started a sign-in per load, spending the visitor's
  // address budget (src/http/login-navigation.ts). What Chromium itself sends for each, and what
  // the gateway answered, read at the gateway's server (the page never sees the image's answer:
  // Cross-Origin-Resource-Policy withholds it, after the gateway has done whatever it did).
  it('an <img> and an <iframe> of /auth/login on another site start nothing', async () => {
    if (!browser) throw new Error('no browser');
    const own = await withTimeout(browser.newContext(), WAIT_MS, 'a new browser context');
    const answered: { site?: string; mode?: string; dest?: string; status: number }[] = [];
    const observe = (req: IncomingMessage, res: ServerResponse) => {
      if (!req.url?.startsWith('/auth/login')) return;
      const headers = { site: req.headers['sec-fetch-site'], mode: req.headers['sec-fetch-mode'], dest: req.headers['sec-fetch-dest'] };
      res.once('finish', () => answered.push({ ...headers, status: res.statusCode }));
    };
    // Ahead of Express, which rewrites req.url as it routes.
    demo.gateway.server.prependListener('request', observe);
    try {
      const page = await own.newPage();
      const before = (await demo.gateway.runtime.transactions.load()).active;
      await page.goto(`${otherUrl}/embed`, { waitUntil: 'load', timeout: WAIT_MS });
      await eventually('both loads answered', WAIT_MS, () => (answered.length >= 2 ? true : undefined));
      expect([...answered].sort((a, b) => String(a.dest).localeCompare(String(b.dest)))).toEqual([
        { site: 'cross-site', mode: 'navigate', dest: 'iframe', status: 400 },
        { site: 'cross-site', mode: 'no-cors', dest: 'image', status: 400 },
      ]);
      expect((await demo.gateway.runtime.transactions.load()).active).toBe(before);
    } finally {
      demo.gateway.server.off('request', observe);
      await closeWithin(own, CLOSE_CONTEXT_MS);
    }
  }, 4 * WAIT_MS);
});
