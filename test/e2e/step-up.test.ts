/**
 * Step-up (RFC 9470) in a real browser, on the embedded default (config/default.yaml, whose
 * /api/payments route needs urn:bff:acr:mfa): sign in with a password, press the SPA's
 * "Call the payments API", get 401 step_up_required, follow its loginUrl to the dev provider,
 * sign in with the second factor, and land back in the SPA where the same call now succeeds
 * and /auth/user reports the stronger acr.
 *
 * Screenshots go to test-artifacts/e2e-step-up/NN-step.png.
 *
 * Mutation that fails this file: in src/http/step-up.ts checkRoute, change
 * `if (ask) throw required(req, ask, session.digest);` to `if (ask) return;`
 * (the first call then succeeds with a password-only session, and no step-up happens).
 */
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { browserSuite, CLOSE_BROWSER_MS, CLOSE_CONTEXT_MS, closeWithin, evaluate, firstVisible, launchChromium, WAIT_MS } from '../support/chromium.js';
import { startDemoOnFreePorts, type RunningDemo } from '../support/demo.js';
import { withTimeout } from '../support/wait.js';

const MFA = 'urn:bff:acr:mfa';
const ARTIFACTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../test-artifacts/e2e-step-up');
const run = browserSuite('test/e2e/step-up.test.ts');

run('step-up in the demo SPA (Chromium)', () => {
  let demo: RunningDemo;
  let browser: Browser | undefined;
  let context: BrowserContext | undefined;
  let shots = 0;

  beforeAll(async () => {
    rmSync(ARTIFACTS, { recursive: true, force: true });
    mkdirSync(ARTIFACTS, { recursive: true });
    demo = await startDemoOnFreePorts();
    browser = await launchChromium();
  }, 45_000);

  afterAll(async () => {
    await closeWithin(context, CLOSE_CONTEXT_MS);
    await closeWithin(browser, CLOSE_BROWSER_MS);
    await demo?.stop();
  }, 5_000 + 10_000 + 20_000 + 5_000);

  async function shot(page: Page, step: string): Promise<void> {
    shots += 1;
    await page.screenshot({ path: path.join(ARTIFACTS, `${String(shots).padStart(2, '0')}-${step}.png`), fullPage: true, timeout: WAIT_MS });
  }

  /** At the provider's login page: the password, and the second factor when it asks; then consent if asked; back in the SPA. */
  async function signInAtProvider(page: Page, step: string): Promise<void> {
    await page.waitForURL((url) => url.origin === demo.idpUrl);
    await page.locator('input[name="login"]').fill('alice');
    await page.locator('input[name="password"]').fill('alice-password');
    await shot(page, `${step}-password`);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const next = await firstVisible({ otp: page.locator('input[name="otp"]'), approve: page.getByRole('button', { name: 'Approve' }), spa: page.getByTestId('signed-in') });
    if (next === 'otp') {
      const code = (await page.locator('#otp-code').textContent()) ?? '';
      expect(code).toMatch(/^\d{6}$/);
      await shot(page, `${step}-second-factor`);
      await page.locator('input[name="otp"]').fill(code);
      await page.getByRole('button', { name: 'Verify' }).click();
    }
    if (next === 'approve' || (await firstVisible({ approve: page.getByRole('button', { name: 'Approve' }), spa: page.getByTestId('signed-in') })) === 'approve') {
      await page.getByRole('button', { name: 'Approve' }).click();
    }
    await page.waitForURL((url) => url.origin === demo.url && url.pathname === '/');
    await page.getByTestId('signed-in').waitFor({ state: 'visible' });
  }

  const acrOfSession = (page: Page) =>
    evaluate<string | null>(page, `fetch('/auth/user', { headers: { 'x-csrf': '1', accept: 'application/json' }, cache: 'no-store' }).then((r) => r.json()).then((u) => u.acr)`);

  it('signs in with a password, is asked to step up by the payments API, and succeeds after the second factor', async () => {
    if (!browser) throw new Error('no browser');
    context = await withTimeout(browser.newContext({ viewport: { width: 1000, height: 900 } }), WAIT_MS, 'a new browser context');
    context.setDefaultTimeout(WAIT_MS);
    context.setDefaultNavigationTimeout(WAIT_MS);
    const page = await withTimeout(context.newPage(), WAIT_MS, 'a new page');

    // 1. A password-only sign-in.
    await page.goto(`${demo.url}/`);
    await page.getByTestId('signed-out').waitFor({ state: 'visible' });
    await page.getByTestId('sign-in').click();
    await signInAtProvider(page, 'first');
    expect(await acrOfSession(page)).not.toBe(MFA);
    await shot(page, 'signed-in-with-password');

    // 2. The payments API answers 401 step_up_required; the SPA follows its loginUrl.
    // (The SPA navigates at once, so the 401's body is read from the navigation it causes.)
    const refused = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/payments');
    const login = page.waitForRequest((r) => new URL(r.url()).pathname === '/auth/login');
    await page.getByTestId('step-up-call').click();
    expect((await refused).status()).toBe(401);
    const loginUrl = new URL((await login).url());
    expect(loginUrl.origin).toBe(demo.url);
    expect(Object.fromEntries(loginUrl.searchParams)).toEqual({ acr_values: MFA, returnTo: '/' });

    // 3. The provider asks for the password and the one-time code.
    await signInAtProvider(page, 'step-up');
    expect(await acrOfSession(page)).toBe(MFA);
    await page.getByTestId('auth-level').getByText(MFA).waitFor();

    // 4. The same call now reaches the demo API.
    const allowed = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/payments');
    await page.getByTestId('step-up-call').click();
    expect((await allowed).status()).toBe(200);
    await page.locator('#step-up-result[data-kind="ok"]').waitFor();
    const result = JSON.parse((await page.getByTestId('step-up-result').textContent()) ?? '{}') as { subject: string; path: string };
    expect(result).toMatchObject({ subject: 'alice', path: '/api/payments' });
    await shot(page, 'stepped-up-api-answer');
  }, 10 * WAIT_MS); // context, SPA, two provider sign-ins (password, code, consent), two API calls, screenshots
});
