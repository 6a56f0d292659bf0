/**
 * Debian's Chromium for the browser suites (test/e2e), through playwright-core: where it is,
 * how it is started, the bound of every wait, and what happens when it is missing (the suite is
 * skipped loudly; under CI, where .ci/run installs it, that is a failure).
 */
import { existsSync } from 'node:fs';
import type { Browser, Locator, Page } from 'playwright-core';
import { withTimeout } from './wait.js';

export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-quic',
  '--no-first-run',
  '--disable-component-update',
  '--disable-sync',
  // No --user-data-dir: Playwright refuses it in `args` and gives every launch a fresh
  // temporary profile of its own (playwright_chromiumdev_profile-*), removed on close.
];
/** Bound of every single wait (Playwright's default timeout, set per context, and ours). */
export const WAIT_MS = 15_000;

export const haveChromium = existsSync(CHROMIUM);

/** `describe` when Chromium is installed; else a loud skip (and a failure under CI). */
export function browserSuite(file: string): jest.Describe {
  if (!haveChromium && process.env.CI) throw new Error(`${CHROMIUM} is missing under CI: the browser suite must run`);
  if (!haveChromium) {
    const banner = `\n${'!'.repeat(100)}\n!!! ${CHROMIUM} is missing: the browser end-to-end tests (${file}) are SKIPPED.\n!!! Install Debian's chromium (.ci/run does it) to run them.\n${'!'.repeat(100)}\n`;
    process.stderr.write(banner);
    console.warn(banner);
  }
  return haveChromium ? describe : describe.skip;
}

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: WAIT_MS });
}

/** Browsers and contexts are closed within these in teardown; one that hangs is left, never a hung suite. */
export const CLOSE_CONTEXT_MS = 5_000;
export const CLOSE_BROWSER_MS = 10_000;

/** Closes `target` (a browser, a context) in teardown: errors ignored, bounded by `ms`. */
export async function closeWithin(target: { close(): Promise<unknown> } | undefined, ms: number): Promise<void> {
  if (target !== undefined) await withTimeout(target.close().catch(() => undefined), ms, 'closing', { fallback: undefined });
}

/** page.evaluate has no timeout of its own: bounded here. */
export function evaluate<T>(page: Page, expression: string): Promise<T> {
  return withTimeout(page.evaluate(expression) as Promise<T>, WAIT_MS, `page.evaluate(${expression.slice(0, 60)})`);
}

/** Which of the named locators is visible once any of them is (Playwright's wait, bounded by WAIT_MS). */
export async function firstVisible(candidates: Record<string, Locator>): Promise<string> {
  const entries = Object.entries(candidates);
  // `first()` of the union is the first in DOM order, perhaps a hidden one: keep the visible ones.
  const any = entries.map(([, l]) => l).reduce((a, b) => a.or(b)).filter({ visible: true });
  try {
    await any.first().waitFor({ state: 'visible', timeout: WAIT_MS });
  } catch {
    throw new Error(`none of ${Object.keys(candidates).join(', ')} became visible within ${WAIT_MS} ms`);
  }
  for (const [name, locator] of entries) if (await locator.first().isVisible()) return name;
  throw new Error(`one of ${Object.keys(candidates).join(', ')} was visible and then none was`);
}

/** The demo provider's pages after the SPA's Sign in: `user`'s password, then the consent (Approve). */
export async function signInAtDemoProvider(page: Page, idpUrl: string, user = 'alice'): Promise<void> {
  await page.waitForURL((url) => url.origin === idpUrl);
  await page.locator('input[name="login"]').fill(user);
  await page.locator('input[name="password"]').fill(`${user}-password`);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Approve' }).click();
}
