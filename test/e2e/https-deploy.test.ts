/**
 * The https deployment of test/integration/deploy/https.test.ts in a real browser: Debian's
 * Chromium behind the same TLS-terminating hop (self-signed certificate, accepted with
 * `ignoreHTTPSErrors`). Chromium itself enforces the cookie rules (a __Host- cookie must be
 * Secure, Path=/, without Domain, and set over https, or it is dropped), so a sign-in that
 * ends with the session cookie in the jar proves the gateway's cookies pass a browser's check,
 * the login binding included (it must come back on the provider's cross-scheme redirect).
 *
 * Mutation check (made by hand once in a throwaway worktree): in src/http/session-cookie.ts
 * loginCookieOptions, `secure: false`: Chromium drops the __Host- login cookie that is not
 * Secure, and the sign-in never gets past the binding (the login cookie assertion fails).
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { browserSuite, CLOSE_BROWSER_MS, CLOSE_CONTEXT_MS, closeWithin, evaluate, launchChromium, WAIT_MS } from '../support/chromium.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../support/gateway.js';
import { startTestProvider, type TestProvider } from '../support/oidc-provider.js';
import { makeSelfSignedCertificate } from '../support/tls-cert.js';
import { startTlsHop, type TlsHop } from '../support/tls-hop.js';
import { startUpstream, type Upstream } from '../support/upstream.js';
import { withTimeout } from '../support/wait.js';

const run = browserSuite('test/e2e/https-deploy.test.ts');

run('an https deployment in Chromium', () => {
  let hop: TlsHop;
  let provider: TestProvider;
  let upstream: Upstream;
  let gw: TestGateway;
  let browser: Browser | undefined;
  let context: BrowserContext | undefined;

  beforeAll(async () => {
    const certificate = makeSelfSignedCertificate();
    const reserved = await reserveServer();
    hop = await startTlsHop({ certificate, target: reserved.url });
    provider = await startTestProvider({ clients: [gatewayClient(hop.url)] });
    upstream = await startUpstream();
    gw = await startTestGateway(
      buildTestConfig({ issuer: provider.issuer, publicUrl: hop.url, server: { trustProxy: true }, routes: [{ path: '/api', target: upstream.url, auth: 'user' }] }),
      reserved,
    );
    browser = await launchChromium();
  }, 45_000);

  afterAll(async () => {
    await closeWithin(context, CLOSE_CONTEXT_MS);
    await closeWithin(browser, CLOSE_BROWSER_MS);
    await gw?.close();
    await hop?.close();
    await upstream?.close();
    await provider?.close();
  }, 30_000);


  it('signs in through the hop, keeps only a Secure __Host- session cookie, calls the API and logs out', async () => {
    if (!browser) throw new Error('no browser');
    const ctx = await withTimeout(browser.newContext({ ignoreHTTPSErrors: true }), WAIT_MS, 'a new browser context');
    context = ctx;
    ctx.setDefaultTimeout(WAIT_MS);
    ctx.setDefaultNavigationTimeout(WAIT_MS);
    const page = await withTimeout(ctx.newPage(), WAIT_MS, 'a new page');
    // Cookies are per host, not per port: the provider's (`_session`, ...) on 127.0.0.1 show up
    // too. The gateway's are the ones named after session.cookieName (bff), prefixed or not.
    const cookies = async () => (await withTimeout(ctx.cookies(hop.url), WAIT_MS, 'the cookies')).filter((c) => c.name.includes('bff'));

    // To the provider (plain http on loopback), log in, consent, and back to the public origin.
    await page.goto(`${hop.url}/auth/login?returnTo=/landed`);
    await page.waitForURL((url) => url.origin === new URL(provider.issuer).origin);
    expect((await cookies()).map((c) => c.name)).toEqual([expect.stringMatching(/^__Host-bff-login\./)]);
    const login = page.locator('input[name="login"]');
    await login.fill('alice');
    await page.locator('input[name="password"]').fill('alice-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL((url) => url.href === `${hop.url}/landed`);

    // Chromium kept the session cookie (it drops a __Host- cookie that breaks the rules) and dropped the binding.
    const jar = await cookies();
    expect(jar.map((c) => ({ name: c.name, secure: c.secure, httpOnly: c.httpOnly, path: c.path, sameSite: c.sameSite }))).toEqual([
      { name: '__Host-bff', secure: true, httpOnly: true, path: '/', sameSite: 'Strict' },
    ]);
    await expect(evaluate(page, 'document.cookie')).resolves.toBe('');

    // A same-origin API call from the page: Bearer upstream, marked https by the hop.
    upstream.reset();
    const status = await evaluate<number>(page, `fetch('/api/echo', { headers: { 'x-csrf': '1' } }).then((r) => r.status)`);
    expect(status).toBe(200);
    expect(upstream.requests.map((r) => [r.headers['x-forwarded-proto'], /^Bearer \S+$/.test(String(r.headers.authorization))])).toEqual([['https', true]]);

    const logout = await evaluate<{ status: number; logoutUrl: string }>(page, `fetch('/auth/logout', { method: 'POST', headers: { 'x-csrf': '1' } }).then(async (r) => ({ status: r.status, ...(await r.json()) }))`);
    expect(logout.status).toBe(200);
    expect(new URL(logout.logoutUrl).searchParams.get('post_logout_redirect_uri')).toBe(`${hop.url}/`);
    expect(await cookies()).toEqual([]);
    await expect(evaluate(page, `fetch('/auth/user', { headers: { 'x-csrf': '1' } }).then((r) => r.status)`)).resolves.toBe(401);
  }, 8 * WAIT_MS); // context, the provider's two pages, the landing, the API call, logout, cookie reads
});
