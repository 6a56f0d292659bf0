/**
 * `session.maxPerUser`: a sign-in past it ends the user's oldest sessions. Without it one
 * account signed in 5,000 times: each listing cost 10,000 Redis commands and a second of CPU,
 * a back-channel logout by sub 40,000 and thousands of revocations at once (found by red team).
 *
 * Mutations that fail this file (checked by hand):
 * - src/http/auth-routes.ts callback: the `registry.trim(…)` call replaced by an empty list
 *   (`const trimmed: … = [];`): both tests.
 * - src/session/registry.ts trim: `const revokes = auth.sid === undefined || oldest.auth.sid !==
 *   auth.sid;` made `const revokes = true;`: the second test (the shared grant revoked: the
 *   newer sessions' refresh tokens died with it).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { tokensOfSession } from '../../support/assertions.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually } from '../../support/wait.js';
import { randomBytes } from 'node:crypto';
import { digest } from '../../../src/redis/keys.js';
import type { AuthData } from '../../../src/session/data.js';

const MAX = 3;
const csrf = { 'x-csrf': '1' };
let upstream: Upstream;
let stack: Stack;

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startStack({ config: { session: { maxPerUser: MAX }, routes: [{ path: '/api', target: upstream.url, auth: 'user' }] } });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

const cookieName = () => stack.config.derived.sessionCookieName;
const call = (client: BrowserClient) => client.get(`${stack.gateway.url}/api/echo`, { headers: csrf });
const refreshTokenOf = async (client: BrowserClient) =>
  (await tokensOfSession(stack.gateway, client.cookies(stack.gateway.url)[cookieName()] as string))?.refreshToken as string;
const listed = async (client: BrowserClient) => ((await client.get(`${stack.gateway.url}/auth/sessions`, { headers: csrf })).json() as unknown[]).length;

it('a sign-in past the cap ends the oldest session, on other devices (their own provider sessions), and revokes its tokens', async () => {
  const devices: BrowserClient[] = [];
  const refreshTokens: string[] = [];
  for (let i = 0; i <= MAX; i++) {
    const device = new BrowserClient();
    await signIn(device, stack.gateway.url, { user: 'alice', password: 'alice-password' });
    devices.push(device);
    refreshTokens.push(await refreshTokenOf(device));
  }
  const [oldest, ...rest] = devices as [BrowserClient, ...BrowserClient[]];
  const oldestRefreshToken = refreshTokens[0] as string;
  expect(oldestRefreshToken).toBeTruthy();
  expect((await call(oldest)).status).toBe(401);
  for (const device of rest) expect((await call(device)).status).toBe(200);
  expect(await listed(rest[0] as BrowserClient)).toBe(MAX);
  await eventually('the oldest refresh token revoked', 10_000, async () => !(await stack.provider.introspect(oldestRefreshToken)).active);
});

it("ends the oldest without revoking when it shares the new session's provider session (a grant the provider may share)", async () => {
  // One browser whose gateway cookie is dropped before each sign-in: the provider's session
  // (and its grant) carries over, and every gateway session has the same sid.
  const browser = new BrowserClient();
  const refreshTokens: string[] = [];
  const cookies: string[] = [];
  for (let i = 0; i <= MAX; i++) {
    browser.deleteCookie(stack.gateway.url, cookieName());
    await signIn(browser, stack.gateway.url, { user: 'bob', password: 'bob-password' });
    refreshTokens.push(await refreshTokenOf(browser));
    cookies.push(browser.cookies(stack.gateway.url)[cookieName()] as string);
  }
  const replay = (cookie: string) => new BrowserClient().get(`${stack.gateway.url}/api/echo`, { headers: { ...csrf, cookie: `${cookieName()}=${cookie}` } });
  expect((await replay(cookies[0] as string)).status).toBe(401);
  for (const cookie of cookies.slice(1)) expect((await replay(cookie)).status).toBe(200);
  // Once every revocation this instance started is over, the newest session's grant is alive.
  await stack.gateway.runtime.revoke.settle(10_000);
  expect(stack.gateway.runtime.revoke.underWay()).toBe(0);
  expect((await stack.provider.introspect(refreshTokens[MAX] as string)).active).toBe(true);
});

/**
 * Found by review: a trim counted sessions signed in after its own as trimmable, so with a cap
 * of 1 a sign-in ended a newer one, and two at once ended each other: no session left. Fails if,
 * in src/session/registry.ts trim, `&& s.auth.createdAt < auth.createdAt` is dropped.
 */
describe('trim, straight on the registry (a cap of 1)', () => {
  let createdAt = Date.now() - 60_000;
  async function saved(sub: string): Promise<{ d: string; auth: AuthData }> {
    const { registry, records } = stack.gateway.runtime;
    const auth: AuthData = { handle: randomBytes(16).toString('base64url'), sub, iss: stack.provider.issuer, claims: {}, scopes: ['openid'], createdAt: (createdAt += 1000) };
    const d = digest(randomBytes(16).toString('hex'));
    await registry.register(d, auth, 'pending');
    await records.write(d, { tokens: { v: 1, sealed: 'v1.k.iv.ct' }, auth });
    await registry.register(d, auth, 'saved');
    return { d, auth };
  }
  const alive = async (d: string) => (await stack.gateway.runtime.records.peek(d)) !== undefined;

  it("a sign-in whose trim runs after a newer one was saved ends the oldest, never the newer", async () => {
    const sub = `u${randomBytes(6).toString('hex')}`;
    const oldest = await saved(sub);
    const a = await saved(sub);
    const b = await saved(sub);
    await stack.gateway.runtime.registry.trim(a.d, a.auth, 1);
    await stack.gateway.runtime.registry.trim(b.d, b.auth, 1);
    expect([await alive(oldest.d), await alive(a.d), await alive(b.d)]).toEqual([false, false, true]);
  });

  it('two sign-ins trimming at once leave the newer one', async () => {
    const sub = `u${randomBytes(6).toString('hex')}`;
    await saved(sub);
    const a = await saved(sub);
    const b = await saved(sub);
    await Promise.all([stack.gateway.runtime.registry.trim(a.d, a.auth, 1), stack.gateway.runtime.registry.trim(b.d, b.auth, 1)]);
    expect(await alive(b.d)).toBe(true);
  });
});
