/**
 * The embedded default in a real browser (SPEC §1): config/default.yaml on free ports, driven
 * in Debian's Chromium through playwright-core. Sign in at the dev provider, call the demo API
 * through the gateway, decline consent, revoke the app at the provider, sign out; and at every
 * step, no token reaches the page: not in cookies JavaScript can read, not in storage, not in
 * a URL, not in any response the browser receives.
 *
 * Screenshots of every step go to test-artifacts/e2e/NN-step.png.
 */
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { browserSuite, CLOSE_BROWSER_MS, CLOSE_CONTEXT_MS, closeWithin, evaluate, firstVisible, launchChromium, WAIT_MS } from '../support/chromium.js';
import { startDemoOnFreePorts, type RunningDemo } from '../support/demo.js';
import { tokensOfSession } from '../support/assertions.js';
import { findSecret } from '../support/secrets.js';
import { withTimeout } from '../support/wait.js';
import type { TestGateway } from '../support/gateway.js';
import type { TokenSet } from '../../src/session/tokens.js';

/**
 * Jest's timeout per test, proportionate to its waits: `steps` sequential phases (navigation,
 * a provider page, an API round trip, reading the recorded bodies...), each bounded by WAIT_MS.
 * A slow step fails with its own message well before this backstop; the global 30 s would cut
 * a healthy test short on a busy machine.
 */
const testTimeout = (steps: number) => steps * WAIT_MS;
const ARTIFACTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../test-artifacts/e2e');

const run = browserSuite('test/e2e/login-flow.test.ts');

// ---------------------------------------------------------------------------------------------
// What the browser saw
// ---------------------------------------------------------------------------------------------

interface SeenResponse {
  url: string;
  status: number;
  headers: string;
  /** undefined when the browser kept no body (redirects, aborted navigations). */
  body: string | undefined;
}

interface Recorder {
  /** Every request URL the browser made, in order. */
  requests: string[];
  responses(): Promise<SeenResponse[]>;
}

/**
 * Records every request and response of a context. Bodies are read by Playwright once each
 * request has finished; a body the page fetched and then navigated away from can no longer be
 * read that way, so an init script also hands the recorder every body page scripts receive
 * through fetch() (what JavaScript could see), as the page reads it.
 */
async function record(context: BrowserContext): Promise<Recorder> {
  const requests: string[] = [];
  const pending: Promise<SeenResponse>[] = [];
  const fetched = new Map<string, string[]>();
  await context.exposeBinding('__bffTestSawFetch', (_source, url: string, body: string) => {
    fetched.set(url, [...(fetched.get(url) ?? []), body]);
  });
  await context.addInitScript(() => {
    // Runs in the page (the project's TypeScript has no DOM library: globalThis stands in for window).
    const page = globalThis as unknown as { fetch: typeof fetch; __bffTestSawFetch: (url: string, body: string) => Promise<void> };
    const original = page.fetch.bind(globalThis);
    page.fetch = async (...args: Parameters<typeof fetch>) => {
      const response = await original(...args);
      response
        .clone()
        .text()
        .then((body: string) => page.__bffTestSawFetch(response.url, body))
        .catch(() => undefined);
      return response;
    };
  });
  context.on('request', (request) => void requests.push(request.url()));
  // Read once the request has finished: the whole body is there and text() answers at once
  // (read at 'response' time, a body the page never consumes can stall until the timeout).
  context.on('requestfinished', (request) => {
    pending.push(
      (async () => {
        const response = await withTimeout(request.response().catch(() => null), 5_000, 'the response', { fallback: null });
        if (!response) return { url: request.url(), status: 0, headers: '', body: undefined };
        const [headers, body] = await Promise.all([
          withTimeout(response.allHeaders().catch(() => ({})), 5_000, 'the headers', { fallback: {} }),
          withTimeout(response.text().catch(() => undefined), 5_000, 'the body', { fallback: undefined }),
        ]);
        return { url: response.url(), status: response.status(), headers: JSON.stringify(headers), body };
      })(),
    );
  });
  return {
    requests,
    async responses() {
      const seen = await Promise.all(pending);
      // A body Playwright could not read is taken from what the page's script read, if it did.
      return seen.map((r) => (r.body === undefined && fetched.has(r.url) ? { ...r, body: (fetched.get(r.url) ?? []).join('\n') } : r));
    },
  };
}

const TOKEN_IN_URL = /[?&#](code|access_token|id_token|refresh_token)=/;
const JWT_LIKE = /eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\./;

function secretsOf(tokens: TokenSet | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (tokens?.accessToken) out.accessToken = tokens.accessToken;
  if (tokens?.refreshToken) out.refreshToken = tokens.refreshToken;
  return out;
}

/**
 * Responses whose body the browser received but the recorder could not read. A body that
 * cannot be read cannot be shown leak-free, so only answers that have none may be unreadable:
 * redirects, 204/304, and requests that got no response at all.
 */
function unreadableBodies(responses: SeenResponse[]): string[] {
  return responses
    .filter((r) => r.body === undefined && r.status !== 0 && r.status !== 204 && r.status !== 304 && (r.status < 300 || r.status >= 400))
    .map((r) => `${r.status} ${r.url.slice(0, 80)}`);
}

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

let demo: RunningDemo;
let browser: Browser | undefined;
let clockOffsetMs = 0;
let shotNumber = 0;
const contexts: BrowserContext[] = [];

async function shot(page: Page, step: string): Promise<void> {
  shotNumber += 1;
  const file = path.join(ARTIFACTS, `${String(shotNumber).padStart(2, '0')}-${step}.png`);
  await page.screenshot({ path: file, fullPage: true, timeout: WAIT_MS });
}

async function newContext(): Promise<{ context: BrowserContext; page: Page; recorder: Recorder }> {
  if (!browser) throw new Error('no browser');
  const context = await withTimeout(browser.newContext({ viewport: { width: 1000, height: 900 } }), WAIT_MS, 'a new browser context');
  contexts.push(context);
  context.setDefaultTimeout(WAIT_MS);
  context.setDefaultNavigationTimeout(WAIT_MS);
  const recorder = await withTimeout(record(context), WAIT_MS, 'the recorder set-up');
  const page = await withTimeout(context.newPage(), WAIT_MS, 'a new page');
  return { context, page, recorder };
}

function gatewayHandle(): TestGateway {
  // tokensOfSession only needs the runtime.
  return { runtime: demo.gateway.runtime } as TestGateway;
}

async function sessionCookie(context: BrowserContext) {
  const cookies = await withTimeout(context.cookies(demo.url), WAIT_MS, 'the context cookies');
  return cookies.find((c) => c.name === demo.config.derived.sessionCookieName);
}

/** Status of GET /auth/user as the SPA would ask it (same-origin fetch with the CSRF header). */
async function authUserStatus(page: Page): Promise<number> {
  return evaluate<number>(page, `fetch('/auth/user', { headers: { 'x-csrf': '1', accept: 'application/json' }, cache: 'no-store' }).then((r) => r.status)`);
}

async function openSpa(page: Page): Promise<void> {
  await page.goto(`${demo.url}/`);
  await firstVisible({ signedOut: page.getByTestId('signed-out'), signedIn: page.getByTestId('signed-in') });
}

/** From the SPA's Sign in link through the provider's pages, up to (not including) the consent answer. */
async function signInAtProvider(page: Page, user: string, password: string, stepPrefix: string): Promise<void> {
  await page.getByTestId('sign-in').click();
  await page.waitForURL((url) => url.origin === demo.idpUrl);
  const login = page.locator('input[name="login"]');
  const approve = page.getByRole('button', { name: 'Approve' });
  if ((await firstVisible({ login, approve })) === 'login') {
    await shot(page, `${stepPrefix}-provider-login`);
    await login.fill(user);
    await page.locator('input[name="password"]').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }
  await approve.waitFor({ state: 'visible' });
  await page.getByText('would like to:').waitFor();
  await shot(page, `${stepPrefix}-provider-consent`);
}

async function approveAndLand(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.waitForURL((url) => url.origin === demo.url && url.pathname === '/');
  await page.getByTestId('signed-in').waitFor({ state: 'visible' });
}

async function callApi(page: Page): Promise<void> {
  const button = page.getByTestId('call-api');
  const done = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/hello');
  await button.click();
  await done;
  // The SPA re-enables the button once it has rendered the answer (or hides the signed-in view).
  // A selector wait, not waitForFunction: a string predicate is eval'd in the page when it has
  // to poll, which the SPA's CSP (rightly) forbids.
  await page.locator('#call-api:enabled, [data-testid="signed-in"][hidden]').first().waitFor({ state: 'attached', timeout: WAIT_MS });
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

run('the demo SPA in Chromium (embedded default)', () => {
  // Shared by the happy path, the revocation and the sign-out: one browser profile, as a user.
  let main: { context: BrowserContext; page: Page; recorder: Recorder };

  beforeAll(async () => {
    rmSync(ARTIFACTS, { recursive: true, force: true });
    mkdirSync(ARTIFACTS, { recursive: true });
    demo = await startDemoOnFreePorts({ clock: () => Date.now() + clockOffsetMs });
    browser = await launchChromium();
  }, 45_000);

  afterAll(async () => {
    for (const context of contexts) await closeWithin(context, CLOSE_CONTEXT_MS);
    await closeWithin(browser, CLOSE_BROWSER_MS);
    await demo?.stop();
    // Up to three contexts (5 s each), the browser (10 s), the demo (gateway 15 s, provider and API 5 s).
  }, 3 * 5_000 + 10_000 + 20_000 + 5_000);

  it('signs in at the provider, calls the API, and never lets a token reach the page', async () => {
    main = await newContext();
    const { context, page, recorder } = main;

    await openSpa(page);
    await page.getByTestId('signed-out').waitFor({ state: 'visible' });
    await shot(page, 'spa-signed-out');

    await signInAtProvider(page, 'alice', 'alice-password', 'happy');
    await approveAndLand(page);
    await expect(page.getByTestId('user-name').textContent()).resolves.toBe('Alice Liddell');
    await page.getByTestId('claims').getByText('alice@example.com').waitFor();
    await shot(page, 'spa-signed-in');

    await callApi(page);
    const resultText = (await page.getByTestId('api-result').textContent()) ?? '';
    const answer = JSON.parse(resultText) as { subject: string; scopes: string[]; message: string; clientId: string };
    expect(answer).toMatchObject({ message: 'Hello from the demo API', subject: 'alice', clientId: 'bff-demo' });
    expect(answer.scopes).toContain('api:read');
    await shot(page, 'spa-api-answer');

    // The only credential: the gateway's HttpOnly cookie, invisible to JavaScript.
    const cookie = await sessionCookie(context);
    expect(cookie).toBeDefined();
    expect(cookie?.httpOnly).toBe(true);
    expect(cookie?.sameSite).toBe('Strict');
    expect(cookie?.path).toBe('/');
    await expect(evaluate(page, 'document.cookie')).resolves.toBe('');

    const tokens = await tokensOfSession(gatewayHandle(), cookie?.value ?? '');
    expect(tokens?.accessToken).toBeTruthy();
    expect(tokens?.refreshToken).toBeTruthy();
    const secrets = secretsOf(tokens);

    const storage = await evaluate<string>(page, `JSON.stringify({ local: Object.entries(localStorage), session: Object.entries(sessionStorage) })`);
    expect(storage).not.toMatch(JWT_LIKE);
    expect(storage).not.toMatch(/token|bearer/i);
    expect(findSecret(storage, secrets)).toBeUndefined();

    // URLs: the callback carries the code; nothing after it carries a code or a token.
    const callbackAt = recorder.requests.findIndex((u) => new URL(u).origin === demo.url && new URL(u).pathname === '/auth/callback');
    expect(callbackAt).toBeGreaterThanOrEqual(0);
    const after = [...recorder.requests.slice(callbackAt + 1), page.url()];
    expect(after.some((u) => new URL(u).pathname === '/api/hello')).toBe(true);
    expect(after.filter((u) => TOKEN_IN_URL.test(u))).toEqual([]);
    expect(recorder.requests.filter((u) => findSecret(u, secrets) !== undefined).map((u) => u.slice(0, 80))).toEqual([]);

    // Response bodies and headers: none holds the access or refresh token.
    const responses = await withTimeout(recorder.responses(), WAIT_MS, 'the recorded responses');
    const read = responses.filter((r) => r.body !== undefined).map((r) => new URL(r.url).pathname);
    expect(read).toEqual(expect.arrayContaining(['/', '/app.js', '/auth/user', '/api/hello']));
    expect(unreadableBodies(responses)).toEqual([]);
    const leaks = responses
      .map((r) => ({ url: r.url, inBody: findSecret(r.body ?? '', secrets), inHeaders: findSecret(r.headers, secrets) }))
      .filter((r) => r.inBody !== undefined || r.inHeaders !== undefined);
    expect(leaks).toEqual([]);
  }, testTimeout(8)); // open the SPA, provider login, consent, landing, API call, screenshots, page reads, recorded bodies

  it('declining consent leaves the SPA signed out with the declined message', async () => {
    const { context, page } = await newContext();
    await openSpa(page);
    await signInAtProvider(page, 'alice', 'alice-password', 'deny');

    await page.getByRole('button', { name: 'Deny' }).click();
    await page.waitForURL((url) => url.origin === demo.url);
    await page.getByTestId('signed-out').waitFor({ state: 'visible' });
    const message = page.getByTestId('message');
    await message.waitFor({ state: 'visible' });
    await expect(message.textContent()).resolves.toMatch(/declined/i);
    await shot(page, 'spa-consent-declined');

    // The SPA tidies ?error=access_denied away; no session was created.
    expect(new URL(page.url()).search).not.toMatch(/code=/);
    expect(await sessionCookie(context)).toBeUndefined();
    await expect(authUserStatus(page)).resolves.toBe(401);
    await expect(page.getByTestId('signed-in').isHidden()).resolves.toBe(true);
  }, testTimeout(5)); // open the SPA, provider login, deny, landing, message

  it('revoking the app at the provider signs the SPA out once the access token is spent', async () => {
    const { context, page } = main;
    await openSpa(page);
    await page.getByTestId('signed-in').waitFor({ state: 'visible' });
    const cookie = await sessionCookie(context);
    const tokens = await tokensOfSession(gatewayHandle(), cookie?.value ?? '');
    expect(tokens?.expiresAt).toBeDefined();

    const account = await withTimeout(context.newPage(), WAIT_MS, 'the account page');
    await account.goto(`${demo.idpUrl}/account`);
    await account.getByRole('heading', { name: 'Connected applications' }).waitFor();
    const row = account.getByRole('row').filter({ hasText: 'bff-demo' });
    await row.waitFor();
    await shot(account, 'provider-connected-apps');
    await row.getByRole('button', { name: 'Revoke' }).click();
    await account.getByRole('status').filter({ hasText: 'revoked' }).waitFor();
    await expect(account.getByRole('row').filter({ hasText: 'bff-demo' }).count()).resolves.toBe(0);
    await shot(account, 'provider-app-revoked');

    await withTimeout(page.bringToFront(), WAIT_MS, 'bringing the SPA to the front');
    // The access token is a self-contained JWT: the demo API accepts it until it expires,
    // revoked grant or not.
    await callApi(page);
    expect(JSON.parse((await page.getByTestId('api-result').textContent()) ?? '{}')).toMatchObject({ subject: 'alice' });
    await shot(page, 'spa-api-still-answers-until-expiry');

    // Let the gateway's clock reach the token's expiry: it must refresh, the provider refuses
    // the revoked refresh token (invalid_grant), the session ends and the SPA signs out.
    clockOffsetMs = ((tokens?.expiresAt ?? 0) + 1) * 1000 - Date.now();
    try {
      await callApi(page);
      await page.getByTestId('signed-out').waitFor({ state: 'visible' });
      await expect(page.getByTestId('api-result').textContent()).resolves.toMatch(/401 login_required/);
      await expect(page.getByTestId('message').textContent()).resolves.toMatch(/session has ended/i);
      await shot(page, 'spa-signed-out-after-revoke');
      await expect(authUserStatus(page)).resolves.toBe(401);
      await expect(tokensOfSession(gatewayHandle(), cookie?.value ?? '')).resolves.toBeUndefined();
    } finally {
      clockOffsetMs = 0;
    }
    await withTimeout(account.close(), WAIT_MS, 'closing the account page');
  }, testTimeout(6)); // open the SPA, account page, revoke, API call, token expiry and sign-out

  it('signs in again and signs out: back to signed out, /auth/user 401', async () => {
    const { context, page } = main;
    await openSpa(page);
    await page.getByTestId('signed-out').waitFor({ state: 'visible' });
    // The provider still knows alice (its own session), but the grant is gone: consent again.
    await signInAtProvider(page, 'alice', 'alice-password', 'again');
    await approveAndLand(page);
    const cookie = await sessionCookie(context);
    expect(cookie).toBeDefined();
    const secrets = secretsOf(await tokensOfSession(gatewayHandle(), cookie?.value ?? ''));
    expect(Object.keys(secrets)).toEqual(['accessToken', 'refreshToken']);
    await shot(page, 'spa-signed-in-again');

    await page.getByTestId('sign-out').click();
    // The gateway answers the provider's end-session URL; the provider asks to confirm.
    const confirm = page.getByRole('button', { name: 'Yes, sign me out' });
    if ((await firstVisible({ confirm, signedOut: page.getByTestId('signed-out') })) === 'confirm') {
      await shot(page, 'provider-sign-out-confirm');
      await confirm.click();
      await page.waitForURL((url) => url.origin === demo.url);
    }
    await page.getByTestId('signed-out').waitFor({ state: 'visible' });
    await shot(page, 'spa-signed-out');

    await expect(authUserStatus(page)).resolves.toBe(401);
    expect(await sessionCookie(context)).toBeUndefined();
    await expect(tokensOfSession(gatewayHandle(), cookie?.value ?? '')).resolves.toBeUndefined();
    await expect(evaluate(page, 'document.cookie')).resolves.toBe('');

    // Sign-out included (its logoutUrl carries only the ID token, as id_token_hint): nothing the
    // browser received or requested in this profile holds the new access or refresh token.
    const seen = await withTimeout(main.recorder.responses(), WAIT_MS, 'the recorded responses');
    expect(unreadableBodies(seen)).toEqual([]);
    const leaks = seen
      .map((r) => ({ url: r.url.slice(0, 80), inBody: findSecret(r.body ?? '', secrets), inHeaders: findSecret(r.headers, secrets) }))
      .filter((r) => r.inBody !== undefined || r.inHeaders !== undefined);
    expect(leaks).toEqual([]);
    expect(main.recorder.requests.filter((u) => findSecret(u, secrets) !== undefined).map((u) => u.slice(0, 80))).toEqual([]);
  }, testTimeout(7)); // open the SPA, provider login, consent, landing, sign-out and confirm, page reads, recorded bodies

  // Clear-Site-Data "cookies" would clear every cookie of the registrable domain (every port of
  // localhost; all of example.com in production), the provider's session included, so the
  // provider could not end its own session. The gateway sends "storage" only.
  it('keeps the provider session cookie at sign-out, so the provider can end its own session', async () => {
    const { context, page } = await newContext();
    await openSpa(page);
    await signInAtProvider(page, 'alice', 'alice-password', 'bug');
    await approveAndLand(page);
    expect((await withTimeout(context.cookies(demo.idpUrl), WAIT_MS, 'the provider cookies')).map((c) => c.name)).toContain('_session');
    const loggedOut = page.waitForResponse((r) => new URL(r.url()).pathname === '/auth/logout');
    await page.getByTestId('sign-out').click();
    await loggedOut;
    const confirm = page.getByRole('button', { name: 'Yes, sign me out' });
    await expect(firstVisible({ confirm, signedOut: page.getByTestId('signed-out') })).resolves.toBe('confirm');
  }, testTimeout(5)); // open the SPA, provider login, consent, landing, sign-out
});
