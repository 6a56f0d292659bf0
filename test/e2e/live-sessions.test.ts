/**
 * Live sessions in a real browser (issue 16): the demo SPA in Debian's Chromium, two tabs of one
 * browser profile. Signing out in one tab makes the other show "You were signed out in another
 * tab" by itself (GET /auth/events, no click, no reload), and near the absolute timeout the SPA
 * counts down. Same harness as login-flow.test.ts: config/default.yaml on free ports, the
 * gateway's clock injectable.
 *
 * Signing in again in one tab (a second login, a step-up) is not a sign-out: the other tab
 * reopens its stream with the new cookie and shows no banner.
 *
 * Mutation checks (done by hand once):
 *   - src/session/registry.ts, end(): drop `options.onEnded?.(sessionDigest, reason);` → the
 *     second tab never hears of the logout and the banner wait fails.
 *   - src/http/auth-routes.ts, callback: `registry.end(old, 'replaced')` → `registry.end(old)`
 *     → the second tab shows "You were signed out in another tab" after the re-sign-in and
 *     the re-sign-in test fails.
 */
import { existsSync } from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startDemoOnFreePorts, type RunningDemo } from '../support/demo.js';
import { CLOSE_BROWSER_MS, CLOSE_CONTEXT_MS, closeWithin, signInAtDemoProvider } from '../support/chromium.js';
import { withTimeout } from '../support/wait.js';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic', '--no-first-run'];
/** Bound of every single wait. */
const WAIT_MS = 15_000;

const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && process.env.CI) throw new Error(`${CHROMIUM} is missing under CI: the browser suite must run`);
if (!haveChromium) console.warn(`${CHROMIUM} is missing: test/e2e/live-sessions.test.ts is SKIPPED`);
const run = haveChromium ? describe : describe.skip;

let demo: RunningDemo;
let browser: Browser | undefined;
let clockOffsetMs = 0;
const contexts: BrowserContext[] = [];

async function newContext(): Promise<BrowserContext> {
  if (!browser) throw new Error('no browser');
  const context = await withTimeout(browser.newContext({ viewport: { width: 1000, height: 900 } }), WAIT_MS, 'a new browser context');
  contexts.push(context);
  context.setDefaultTimeout(WAIT_MS);
  context.setDefaultNavigationTimeout(WAIT_MS);
  return context;
}

async function openSpa(page: Page): Promise<void> {
  await page.goto(`${demo.url}/`);
  await page.getByTestId('signed-out').or(page.getByTestId('signed-in')).filter({ visible: true }).first().waitFor();
}

async function signIn(page: Page): Promise<void> {
  await openSpa(page);
  await page.getByTestId('sign-in').click();
  await signInAtDemoProvider(page, demo.idpUrl);
  await page.waitForURL((url) => url.origin === demo.url && url.pathname === '/');
  await page.getByTestId('signed-in').waitFor({ state: 'visible' });
}

/** Signs in again from the signed-in SPA; the provider may remember the user and skip its forms. */
async function signInAgain(page: Page): Promise<void> {
  await page.goto(`${demo.url}/auth/login`);
  for (let step = 0; step < 3 && new URL(page.url()).origin !== demo.url; step += 1) {
    const login = page.locator('input[name="login"]');
    const approve = page.getByRole('button', { name: 'Approve' });
    const back = page.waitForURL((url) => url.origin === demo.url, { timeout: WAIT_MS });
    const next = await Promise.race([
      login.waitFor({ state: 'visible' }).then(() => 'login' as const),
      approve.waitFor({ state: 'visible' }).then(() => 'approve' as const),
      back.then(() => 'back' as const),
    ]);
    if (next === 'login') {
      await login.fill('alice');
      await page.locator('input[name="password"]').fill('alice-password');
      await page.getByRole('button', { name: 'Sign in' }).click();
    } else if (next === 'approve') {
      await approve.click();
    }
  }
  await page.waitForURL((url) => url.origin === demo.url && url.pathname === '/');
  await page.getByTestId('signed-in').waitFor({ state: 'visible' });
}

/** Resolves once the page's GET /auth/events has its answer head (the stream is open). */
function eventStreamOpened(page: Page): Promise<unknown> {
  return page.waitForResponse((r) => new URL(r.url()).pathname === '/auth/events' && r.status() === 200);
}

/** Two tabs of one browser profile, signed in through the first; the second's event stream is open. */
async function twoSignedInTabs(): Promise<{ first: Page; second: Page }> {
  const context = await newContext();
  const first = await context.newPage();
  await signIn(first);
  const second = await context.newPage();
  const streaming = eventStreamOpened(second);
  await openSpa(second);
  await second.getByTestId('signed-in').waitFor({ state: 'visible' });
  await streaming;
  return { first, second };
}

run('live sessions in the demo SPA (Chromium)', () => {
  beforeAll(async () => {
    demo = await startDemoOnFreePorts({ clock: () => Date.now() + clockOffsetMs });
    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: WAIT_MS });
  }, 45_000);

  afterAll(async () => {
    for (const context of contexts) await closeWithin(context, CLOSE_CONTEXT_MS);
    await closeWithin(browser, CLOSE_BROWSER_MS);
    await demo?.stop();
  }, 40_000);

  it('signing out in one tab shows the other tab a banner, without any click', async () => {
    const { first, second } = await twoSignedInTabs();
    await expect(second.getByTestId('live-banner').isHidden()).resolves.toBe(true);

    await first.getByTestId('sign-out').click();
    const banner = second.getByTestId('live-banner');
    await banner.waitFor({ state: 'visible' });
    await expect(banner.textContent()).resolves.toBe('You were signed out in another tab.');
    await second.getByTestId('signed-out').waitFor({ state: 'visible' });
  }, 8 * WAIT_MS);

  it('signing in again in one tab reopens the other tab\'s stream silently, without a banner', async () => {
    const { first, second } = await twoSignedInTabs();

    // The old session ends at the new sign-in's callback; the second tab is told `replaced`,
    // asks /auth/user (the new cookie) and opens its stream again.
    const reopened = second.waitForResponse((r) => new URL(r.url()).pathname === '/auth/events' && r.status() === 200, { timeout: 4 * WAIT_MS });
    await signInAgain(first);
    await reopened;
    await expect(second.getByTestId('live-banner').isHidden()).resolves.toBe(true);
    await expect(second.getByTestId('signed-in').isVisible()).resolves.toBe(true);

    // A real sign-out after that still shows the banner in the second tab.
    await first.getByTestId('sign-out').click();
    const banner = second.getByTestId('live-banner');
    await banner.waitFor({ state: 'visible' });
    await expect(banner.textContent()).resolves.toBe('You were signed out in another tab.');
  }, 10 * WAIT_MS);

  it('counts down before the absolute timeout', async () => {
    const context = await newContext();
    const page = await context.newPage();
    await signIn(page);
    // Two minutes before this session's absolute end, as the gateway's clock sees it.
    clockOffsetMs = demo.config.session.absoluteTimeoutSeconds * 1000 - 120_000;
    try {
      await page.reload();
      const countdown = page.getByTestId('live-countdown');
      await countdown.waitFor({ state: 'visible' });
      await expect(countdown.textContent()).resolves.toMatch(/^Your session ends in [12]:\d\d\. /);
    } finally {
      clockOffsetMs = 0;
    }
  }, 6 * WAIT_MS);
});
