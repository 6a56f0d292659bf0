/**
 * Per-user API answers and the browser's HTTP cache, in Debian's Chromium. The upstream caches
 * as a Bearer API may (`Cache-Control: max-age=300`); the browser's request carried a cookie,
 * not the Authorization the upstream saw, so the answer must vary on the cookie, and a sign-out
 * must clear what the browser kept (found by red team: the next user of the same browser was
 * shown the previous user's answer, from the cache).
 *
 * - `Vary: Authorization` from the upstream: read as Cookie. Fails if, in
 *   src/proxy/cache-headers.ts varyOnCookie, `return value;` comes first (Vary relayed as is).
 * - No Vary at all: `Vary: Cookie` is added. Fails if, in asCookieAnswer,
 *   `headers.push('Vary', 'Cookie');` is removed.
 * - A sign-out clears the answers kept (they stay on disk otherwise, under the old cookie).
 *   Fails if, in src/http/signed-in-routes.ts logout, Clear-Site-Data is `"storage"` again.
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

  /** Alice's answer, then Bob's in the same browser once her cookie is replaced by his (no sign-out). */
  async function nextUserSees(headers: Record<string, string>) {
    const [alice, bob] = [await sessionOf('alice'), await sessionOf('bob')];
    const calls = answerCacheably(headers);
    const { page, become } = await browserAs(alice);
    const first = await call(page, '/api/me');
    expect(first.status).toBe(200);
    // Alice's own second call may come from the cache: the cookie is the same.
    expect((await call(page, '/api/me')).body).toBe(first.body);
    await become(bob);
    const second = await call(page, '/api/me');
    expect(second.status).toBe(200);
    return { first, second, calls: calls() };
  }

  it("Vary: Authorization: the next user's call reaches the upstream and gets their own answer", async () => {
    const { first, second, calls } = await nextUserSees({ vary: 'Authorization' });
    expect(second.body).not.toBe(first.body);
    expect(calls).toBe(2);
  });

  it("no Vary: the next user's call reaches the upstream and gets their own answer", async () => {
    const { first, second, calls } = await nextUserSees({});
    expect(second.body).not.toBe(first.body);
    expect(calls).toBe(2);
  });

  it('a sign-out clears the answers the browser kept', async () => {
    const alice = await sessionOf('alice');
    answerCacheably({});
    const { page, become } = await browserAs(alice);
    expect((await call(page, '/api/me')).status).toBe(200);
    const cached = () =>
      withTimeout(
        page.evaluate(async () => {
          try {
            const r = await fetch('/api/me', { headers: { 'x-csrf': '1' }, cache: 'only-if-cached', mode: 'same-origin' });
            return r.status;
          } catch {
            return 'not cached';
          }
        }),
        WAIT_MS,
        'a cache-only read in the page',
      );
    expect(await cached()).toBe(200);
    expect((await call(page, '/auth/logout', 'POST')).status).toBe(200);
    // The old cookie back, so that the cache key matches: nothing is kept under it.
    await become(alice);
    expect(await cached()).toBe('not cached');
  });
});
