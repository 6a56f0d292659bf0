/**
 * Token and session lifetimes no other test pins down (SPEC §4, §5; issue 14): a token inside
 * `refreshSkewSeconds` is refreshed before use (and one outside it is not); a refresh keeps the
 * session's idle TTL and every proxied call slides it; the tokens of a session ended by
 * back-channel logout or by POST /auth/logout are revoked at the provider; logout sends
 * Clear-Site-Data.
 *
 * Mutation checks (each by hand, once):
 *  - src/session/tokens.ts expiresWithin: ignore the skew (`token.expiresAt <= nowSeconds`) →
 *    the skew test fails.
 *  - src/session/records.ts CAS_TOKENS: `redis.call('SET', KEYS[1], val)` in both branches
 *    (drops the TTL) → the TTL test fails; view(): `redis.getexBuffer(...)` → `redis.getBuffer(key)`
 *    (no slide) → the sliding assertion fails.
 *  - src/http/session-routes.ts: drop the revocation after back-channel logout → that test fails.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { revokedAtProvider, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { digest } from '../../../src/redis/keys.js';

const csrf = { 'x-csrf': '1' };
const SKEW = 30;
const IDLE = 600;
const clock = createTestClock();
let upstream: Upstream;
let stack: Stack;

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startStack({
    clock,
    config: {
      tokens: { refreshSkewSeconds: SKEW },
      session: { idleTimeoutSeconds: IDLE },
      routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
    },
  });
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

interface SignedIn {
  client: BrowserClient;
  cookie: string;
  key: string;
}

async function signedIn(): Promise<SignedIn> {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  const cookie = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
  return { client, cookie, key: stack.gateway.runtime.keys.session(digest(sessionIdFromCookie(cookie))) };
}

/** The Authorization the upstream received for one proxied call. */
async function callUpstream(b: SignedIn): Promise<string | undefined> {
  upstream.reset();
  const res = await b.client.get(`${stack.gateway.url}/api/echo`, { headers: csrf });
  expect(res.status).toBe(200);
  return upstream.requests[0]?.headers.authorization as string | undefined;
}

const nowSeconds = () => Math.floor(clock.now() / 1000);
const refreshGrants = () => stack.provider.counters.grants.refresh_token ?? 0;

describe('tokens.refreshSkewSeconds', () => {
  it('refreshes a token expiring inside the window before using it, and not one expiring after it', async () => {
    const b = await signedIn();
    const first = await tokensOfSession(stack.gateway, b.cookie);
    const expiresAt = first?.expiresAt as number;
    expect(expiresAt).toBeGreaterThan(nowSeconds() + SKEW + 10);

    // 1. Ten seconds outside the window: the same token, no refresh.
    clock.advance(expiresAt - SKEW - 10 - nowSeconds());
    const grants = refreshGrants();
    expect(await callUpstream(b)).toBe(`Bearer ${first?.accessToken}`);
    expect(refreshGrants()).toBe(grants);

    // 2. Ten seconds inside it (the token still valid for 20 s): refreshed first, the new one sent.
    clock.advance(20);
    const sent = await callUpstream(b);
    expect(refreshGrants()).toBe(grants + 1);
    const second = await tokensOfSession(stack.gateway, b.cookie);
    expect(second?.accessToken).not.toBe(first?.accessToken);
    expect(sent).toBe(`Bearer ${second?.accessToken}`);
  });
});

describe('the idle timeout (the Redis TTL)', () => {
  it('is slid by every proxied call and kept by a refresh', async () => {
    const b = await signedIn();
    const redis = stack.gateway.runtime.redis;

    await redis.pexpire(b.key, 100_000);
    await callUpstream(b);
    const slid = await redis.pttl(b.key);
    expect(slid).toBeGreaterThan(100_000);
    expect(slid).toBeLessThanOrEqual(IDLE * 1000);

    // A refresh replaces the token set by compare-and-set: the key must keep an expiry.
    const before = await tokensOfSession(stack.gateway, b.cookie);
    const grants = refreshGrants();
    clock.advance((before?.expiresAt as number) - nowSeconds() + 1);
    await callUpstream(b);
    expect(refreshGrants()).toBe(grants + 1);
    const after = await redis.pttl(b.key);
    expect(after).toBeGreaterThan(0);
    expect(after).toBeLessThanOrEqual(IDLE * 1000);
  });
});

describe('revocation when a session ends', () => {
  it('revokes the refresh token after a back-channel logout, once the provider has its answer', async () => {
    const b = await signedIn();
    const tokens = await tokensOfSession(stack.gateway, b.cookie);
    const sid = (await stack.gateway.runtime.records.peek(digest(sessionIdFromCookie(b.cookie))))?.auth?.sid;
    expect(sid).toEqual(expect.any(String));
    expect((await stack.provider.introspect(tokens?.refreshToken as string)).active).toBe(true);

    const logoutToken = await stack.provider.signLogoutToken({ sid });
    const res = await new BrowserClient().post(`${stack.gateway.url}/auth/backchannel-logout`, { form: { logout_token: logoutToken } });
    expect(res.status).toBe(200);
    expect((await b.client.get(`${stack.gateway.url}/auth/user`, { headers: csrf })).status).toBe(401);
    await revokedAtProvider(stack.provider, tokens?.refreshToken);
  });

  it('revokes on POST /auth/logout and tells the browser to clear site storage', async () => {
    const b = await signedIn();
    const tokens = await tokensOfSession(stack.gateway, b.cookie);
    const res = await b.client.post(`${stack.gateway.url}/auth/logout`, { headers: csrf });
    expect(res.status).toBe(200);
    expect(res.headers.get('clear-site-data')).toBe('"cache", "storage"');
    expect(res.headers.getSetCookie().some((c) => c.startsWith(`${stack.config.derived.sessionCookieName}=;`) && /Expires=Thu, 01 Jan 1970/.test(c))).toBe(true);
    expect((await stack.provider.introspect(tokens?.refreshToken as string)).active).toBe(false);
  });
});
