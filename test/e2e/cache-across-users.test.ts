/**
 * Per-user API answers and the browser's HTTP cache, in Debian's Chromium. The upstream caches
 * as a Bearer API may (`Cache-Control: max-age=300`); the browser's request carried a cookie,
 * not the Authorization the upstream saw, so what the upstream says about Authorization must be
 * said about the cookie, and a sign-out must clear what the browser kept (found by red team:
 * the next user of the same browser was shown the previous user's answer, from the cache).
 *
 * - `Vary: Authorization` from the upstream: the browser keys its cache on the cookie. Fails if,
 *   in src/proxy/cache-headers.ts varyOnCookie, `return value;` comes first (Vary relayed as is).
 * - No Vary at all, and a sign-out: the cache is cleared. Fails if, in src/http/auth-routes.ts
 *   logout, Clear-Site-Data is `"storage"` again (without `"cache"`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { BrowserClient } from '../support/browser-client.js';
import { browserSuite, launchChromium, WAIT_MS } from '../support/chromium.js';
import { signIn } from '../support/drive-login.js';
import { startStack, type Stack } from '../support/stack.js';
import { startUpstream, type Upstream } from '../support/upstream.js';
import { withTimeout } from '../support/wait.js';

const run = browserSuite('test/e2e/cache-across-users.test.ts');

let stack: Stack;
let upstream: Upstream;
let browser: Browser | undefined;
let context: BrowserContext | undefined;

run('a per-user answer cached by the browser', () => {
  beforeAll(async () => {
    upstream = await startUpstream();
    stack = await startStack({ config: { routes: [{ path: '/api', target: upstream.url, auth: 'user' }] } });
    browser = await launchChromium();
  }, 60_000);
  afterEach(async () => {
    await context?.close();
    context = undefined;
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
    await upstream?.close();
  });

  /** A session cookie of `user`'s, signed in outside the browser. */
  const sessionOf = async (user: string) => {
    const client = new BrowserClient();
    await signIn(client, stack.gateway.url, { user });
    return client.cookies(stack.gateway.url)[stack.gateway.config.derived.sessionCookieName] as string;
  };

  /** The upstream answers who called (the token's last characters), cacheable for 5 minutes. */
  const answerCacheably = (headers: Record<string, string>) => {
    let calls = 0;
    upstream.setHandler((req: IncomingMessage, res: ServerResponse) => {
      calls += 1;
      const token = (req.headers.authorization ?? '').split(' ')[1] ?? '';
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=300', ...headers });
      res.end(JSON.stringify({ caller: token.slice(-8), call: calls }));
    });
    return () => calls;
  };

  async function browserAs(cookie: string): Promise<{ page: Page; become: (next: string) => Promise<void> }> {
    context = await (browser as Browser).newContext();
    context.setDefaultTimeout(WAIT_MS);
    const host = new URL(stack.gateway.url).hostname;
    const name = stack.gateway.config.derived.sessionCookieName;
    const become = (value: string) => (context as BrowserContext).addCookies([{ name, value, domain: host, path: '/', httpOnly: true, sameSite: 'Strict' }]);
    await become(cookie);
    const page = await context.newPage();
    await page.goto(`${stack.gateway.url}/auth/no-such-page`);
    return { page, become };
  }

  const call = (page: Page, path: string, method = 'GET') =>
    withTimeout(
      page.evaluate(
        async ([p, m]) => {
          const r = await fetch(p as string, { method: m as string, headers: { 'x-csrf': '1' } });
          return { status: r.status, body: await r.text() };
        },
        [path, method],
      ),
      WAIT_MS,
      `${method} ${path} in the page`,
    );

  it("Vary: Authorization: the next user's call reaches the upstream and gets their own answer", async () => {
    const [alice, bob] = [await sessionOf('alice'), await sessionOf('bob')];
    const calls = answerCacheably({ vary: 'Authorization' });
    const { page, become } = await browserAs(alice);
    const first = await call(page, '/api/me');
    expect(first.status).toBe(200);
    // Alice's own second call may come from the cache: the cookie is the same.
    expect((await call(page, '/api/me')).body).toBe(first.body);
    // Her session ends without a sign-out in this browser (a timeout, another device); Bob signs in.
    await become(bob);
    const second = await call(page, '/api/me');
    expect(second.status).toBe(200);
    expect(second.body).not.toBe(first.body);
    expect(calls()).toBe(2);
  });

  it('no Vary: a sign-out clears what the browser kept', async () => {
    const [alice, bob] = [await sessionOf('alice'), await sessionOf('bob')];
    const calls = answerCacheably({});
    const { page, become } = await browserAs(alice);
    const first = await call(page, '/api/me');
    expect(first.status).toBe(200);
    expect((await call(page, '/auth/logout', 'POST')).status).toBe(200);
    await become(bob);
    const second = await call(page, '/api/me');
    expect(second.status).toBe(200);
    expect(second.body).not.toBe(first.body);
    expect(calls()).toBe(2);
  });
});
