/**
 * Signing in again ends the previous session, as a real browser does it with the default
 * SameSite=Strict session cookie: /auth/login is a same-site navigation (the cookie is sent),
 * the provider's redirect to /auth/callback is a cross-site one (it is not; RFC 6265bis
 * §5.2). The gateway notes the session at /auth/login and ends it after a successful sign-in.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { completeAtProvider, signIn, startLogin, type ProviderLoginOptions } from '../../support/drive-login.js';
import { digest } from '../../../src/redis/keys.js';
import { expectErrorBody, expectNoSecretIn, revokedAtProvider, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { openStream } from '../../support/live-streams.js';
import { startStack, type Stack } from '../../support/stack.js';
import type { TestGateway } from '../../support/gateway.js';

let stack: Stack;
let gw: TestGateway;
const csrf = { 'x-csrf': '1' };

beforeAll(async () => {
  stack = await startStack();
  gw = stack.gateway;
});

afterAll(() => stack?.close());

const cookieName = () => gw.config.derived.sessionCookieName;
const sessionCookie = (client: BrowserClient) => client.cookies(gw.url)[cookieName()] as string;

/** What a browser holding only this session cookie gets from /auth/user. */
async function userWith(cookie: string) {
  const other = new BrowserClient();
  other.setCookie(gw.url, cookieName(), cookie, { sameSite: 'strict' });
  return other.get(`${gw.url}/auth/user`, { headers: csrf });
}

async function recordExists(cookie: string): Promise<boolean> {
  return (await gw.runtime.redis.exists(gw.runtime.keys.session(digest(sessionIdFromCookie(cookie))))) === 1;
}

/** GET /auth/login same-site, through the provider, up to the (not yet requested) callback URL. */
async function loginAgain(client: BrowserClient, as: ProviderLoginOptions = {}): Promise<string> {
  const login = await client.get(`${gw.url}/auth/login?returnTo=/again`);
  expect(login.status).toBe(302);
  return completeAtProvider(client, login.redirectUrl as string, as);
}

/**
 * A browser signed in starts two sign-ins (two tabs), completes the first, then, from that new
 * session, the sign-in `meanwhile` makes (its cookie), then the late tab's: only the last lives.
 * With `ownGrant`, the late tab signs in at the provider in a provider session of its own (its
 * code is of another grant than the first tab's).
 */
async function lateTabAfter(meanwhile: (client: BrowserClient) => Promise<string>, ownGrant = false): Promise<void> {
  const client = new BrowserClient();
  await signIn(client, gw.url);
  const callbackA = await loginAgain(client);
  if (ownGrant) forgetProviderSession(client);
  const callbackLate = await loginAgain(client);
  const first = await comeBack(client, callbackA);
  const second = await meanwhile(client);
  const last = await comeBack(client, callbackLate);
  expect(new Set([first, second, last]).size).toBe(3);
  expect((await userWith(first)).status).toBe(401);
  expect((await userWith(second)).status).toBe(401);
  expect((await userWith(last)).status).toBe(200);
}

/** The provider's session cookies gone: the next sign-in there is a new provider session, and a new grant. */
function forgetProviderSession(client: BrowserClient): void {
  for (const c of client.cookieDetails(stack.provider.issuer)) client.deleteCookie(stack.provider.issuer, c.name);
}

const revoked = (token: string | undefined) => revokedAtProvider(stack.provider, token);

/** The provider's redirect back to `callback` (cross-site: no Strict cookie); the cookie it leaves. */
async function comeBack(client: BrowserClient, callback: string): Promise<string> {
  const res = await client.get(callback, { crossSite: true });
  expect(res.status).toBe(302);
  expect(res.headers.get('location')).toBe(`${gw.url}/again`);
  return sessionCookie(client);
}

describe('signing in again with a SameSite=Strict session cookie', () => {
  it('ends the previous session although the callback does not carry its cookie', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    const old = sessionCookie(client);
    expect((await userWith(old)).status).toBe(200);
    // The default: the callback below is exactly the request on which this cookie is withheld.
    expect(client.cookieDetails(gw.url).find((c) => c.name === cookieName())?.sameSite).toBe('strict');

    const fresh = await comeBack(client, await loginAgain(client));
    expect(fresh).not.toBe(old);

    expectErrorBody(await userWith(old), 'login_required', 401);
    expect(await recordExists(old)).toBe(false);
    expect((await userWith(fresh)).status).toBe(200);
    // Nor is it listed among the user's sessions any more.
    const sessions = (await client.get(`${gw.url}/auth/sessions`, { headers: csrf })).json() as { current: boolean }[];
    expect(sessions.filter((s) => s.current)).toHaveLength(1);
  });

  it('ends nothing when the provider answers with an error (the user declined)', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    const old = sessionCookie(client);

    const login = await client.get(`${gw.url}/auth/login`);
    const state = new URL(login.redirectUrl as string).searchParams.get('state') as string;
    const declined = new URL(`${gw.url}/auth/callback`);
    declined.search = new URLSearchParams({ error: 'access_denied', state, iss: stack.provider.issuer }).toString();
    const res = await client.get(declined.href, { crossSite: true });
    expect(res.headers.get('location')).toBe(`${gw.url}/?error=access_denied`);

    expect((await userWith(old)).status).toBe(200);
    expect(await recordExists(old)).toBe(true);
  });

  it('ends nothing when the sign-in fails', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    const old = sessionCookie(client);

    const callback = new URL(await loginAgain(client));
    callback.searchParams.set('code', 'not-a-code-the-provider-issued');
    const res = await client.get(callback.href, { crossSite: true, headers: { accept: 'application/json' } });
    expect(res.status).toBeGreaterThanOrEqual(400);

    expect((await userWith(old)).status).toBe(200);
    expect(await recordExists(old)).toBe(true);
  });

  // The first tab's new session lived on unseen (its cookie overwritten by the second's), listed
  // as another device, its grant alive after the browser signed out. Two mechanisms end it now:
  // the succession noted on the replaced session (registry.succeed) and the note left for the
  // second tab's login cookie (registry.rivals); it fails only without both.
  it('two tabs signing in again at once: the browser keeps one session, and its sign-out ends all', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    const old = sessionCookie(client);
    // Both tabs start a sign-in (both were asked to step up), then come back in turn.
    const [callbackA, callbackB] = [await loginAgain(client), await loginAgain(client)];
    const first = await comeBack(client, callbackA);
    const second = await comeBack(client, callbackB);
    expect(new Set([old, first, second]).size).toBe(3);

    expect((await userWith(old)).status).toBe(401);
    expect((await userWith(first)).status).toBe(401);
    expect(await recordExists(first)).toBe(false);
    expect((await userWith(second)).status).toBe(200);
    expect((await client.post(`${gw.url}/auth/logout`, { headers: csrf })).status).toBe(200);
    for (const cookie of [old, first, second]) expect((await userWith(cookie)).status).toBe(401);
  });

  // The same user throughout: the notes for the late tab's login cookie (registry.rivals) and
  // the succession chain (registry.succeed) each end every session; the next test needs the chain.
  it('a late tab ends every session of the browser signed in since it started', async () => {
    // From the first tab's new session, another sign-in (say, to step up) completes.
    await lateTabAfter(async (client) => comeBack(client, await loginAgain(client)));
  });

  // Fails if, in src/session/succession.ts succeed, the chain is not followed (`before =
  // await redis.get(keys.successor(before));` → `before = null;`), or if supersede no longer
  // calls succeed: the other user's session signed in from the first tab's lived on, its cookie
  // overwritten by the late tab's (the notes for login cookies end only the same user's).
  // Bob's grant is revoked too: fails if, in src/http/auth-routes.ts callback, what
  // `registry.supersede(...)` ended is not handed to revokeOtherUsers. The late tab signs in at
  // the provider in a provider session of its own: bob's sign-in over the first tab's session
  // revokes that session's grant, alice's, which would otherwise be the late tab's too (its
  // code then fails, and the browser keeps bob's session).
  it("a late tab ends another user's session signed in from this browser meanwhile (the succession chain)", async () => {
    let bobsRefreshToken: string | undefined;
    await lateTabAfter(async (client) => {
      // From the first tab's new session, bob signs in, in a provider session of his own.
      forgetProviderSession(client);
      const bob = await comeBack(client, await loginAgain(client, { user: 'bob', password: 'bob-password' }));
      expect((await userWith(bob)).json<{ sub: string }>().sub).toBe('bob');
      bobsRefreshToken = (await tokensOfSession(gw, bob))?.refreshToken;
      return bob;
    }, true);
    await revoked(bobsRefreshToken);
  });

  // Fails if, in src/session/succession.ts replace, another user's session is not told apart
  // (`const otherUser = of !== undefined && of !== user;` → `= false;`): alice's refresh token outlived her session, held
  // by no one, as if she had never signed out of this app on a shared computer (found by red
  // team). The same user's replaced session is not revoked: oidc-provider reuses the grant.
  it("another user signing in over a session revokes that user's grant; the same user's new sign-in keeps it", async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    const alice = await tokensOfSession(gw, sessionCookie(client));
    await comeBack(client, await loginAgain(client));
    const aliceAgain = await tokensOfSession(gw, sessionCookie(client));
    expect((await stack.provider.introspect(alice?.refreshToken as string)).active).toBe(true);

    forgetProviderSession(client);
    const bob = await comeBack(client, await loginAgain(client, { user: 'bob', password: 'bob-password' }));
    expect((await userWith(bob)).json<{ sub: string }>().sub).toBe('bob');
    await revoked(aliceAgain?.refreshToken);
    expect((await stack.provider.introspect((await tokensOfSession(gw, bob))?.refreshToken as string)).active).toBe(true);
  });

  // Found by a red team in Chromium (a shared computer): another user's sign-in over a session
  // left the first user's SPA storage to the next, and told the first user's tabs `replaced`,
  // on which an SPA reconnects and goes on as the next user. Fails if, in src/http/auth-routes.ts
  // callback, `if (startsClean) clearSiteData(res);` is removed, or if src/session/succession.ts
  // replace() ends with 'replaced' whoever's the session was.
  it("another user's sign-in clears what the browser kept and tells the first user's tabs `revoked`; the same user's keeps both", async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    const watch = () => openStream(`${gw.url}/auth/events`, { cookie: `${cookieName()}=${sessionCookie(client)}`, origin: gw.config.derived.publicOrigin });

    const first = await watch();
    const again = await client.get(await loginAgain(client), { crossSite: true });
    expect(again.status).toBe(302);
    expect(again.headers.get('clear-site-data')).toBeNull();
    expect(JSON.parse((await first.waitForEvent('signed-out', 10_000)).data)).toEqual({ reason: 'replaced' });

    const second = await watch();
    forgetProviderSession(client);
    const bob = await client.get(await loginAgain(client, { user: 'bob', password: 'bob-password' }), { crossSite: true });
    expect(bob.status).toBe(302);
    expect(bob.headers.get('clear-site-data')).toBe('"cache", "storage"');
    expect(JSON.parse((await second.waitForEvent('signed-out', 10_000)).data)).toEqual({ reason: 'revoked' });
  });

  // Found by review: clearing whenever the previous session's user was unknown wiped the SPA's
  // storage at every sign-in after an idle timeout, and at the second of two tabs stepping up.
  // Fails if, in src/http/auth-routes.ts callback, `startsClean` is also set for a session gone
  // at the callback whose user is unknown (`|| ended.length < replaced.size`).
  it('the same user signing in after a timeout, or in two tabs at once, keeps what the browser kept', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    // Its idle timeout lapsed (Redis let the record expire) before the sign-in started.
    expect(await gw.runtime.redis.del(gw.runtime.keys.session(digest(sessionIdFromCookie(sessionCookie(client)))))).toBe(1);
    const again = await client.get(await loginAgain(client), { crossSite: true });
    expect(again.status).toBe(302);
    expect(again.headers.get('clear-site-data')).toBeNull();
    const [tabA, tabB] = [await loginAgain(client), await loginAgain(client)];
    for (const callback of [tabA, tabB]) {
      const back = await client.get(callback, { crossSite: true });
      expect(back.status).toBe(302);
      expect(back.headers.get('clear-site-data')).toBeNull();
    }
  });

  // Fails if, in src/http/auth-routes.ts callback, `(tx.previousUser !== undefined && tx.previousUser !== signedInAs)`
  // is dropped from `startsClean` (or login no longer notes `previousUser`).
  it("another user signing in over a session that ended meanwhile (the provider's back-channel logout) clears what the browser kept", async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    const login = await client.get(`${gw.url}/auth/login?returnTo=/again`);
    expect(login.status).toBe(302);
    // As bob signs in at the provider, the provider's back-channel logout ends alice's session.
    expect(await gw.runtime.redis.del(gw.runtime.keys.session(digest(sessionIdFromCookie(sessionCookie(client)))))).toBe(1);
    forgetProviderSession(client);
    const callback = await completeAtProvider(client, login.redirectUrl as string, { user: 'bob', password: 'bob-password' });
    const back = await client.get(callback, { crossSite: true });
    expect(back.status).toBe(302);
    expect(back.headers.get('clear-site-data')).toBe('"cache", "storage"');
  });

  // Fails if, in src/session/succession.ts rivals, the note left for this sign-in is not read
  // (`consider(await redis.get(keys.predecessor(own)))` removed): the first tab's session lived
  // on unseen, its cookie overwritten by the second's (no session to note at /auth/login, and
  // the Strict cookie is not sent to the callback).
  it('two tabs signing in at once with no session yet: the browser keeps one session, and its sign-out ends all', async () => {
    const client = new BrowserClient();
    const [callbackA, callbackB] = [await loginAgain(client), await loginAgain(client)];
    const first = await comeBack(client, callbackA);
    const second = await comeBack(client, callbackB);
    expect(first).not.toBe(second);
    expectErrorBody(await userWith(first), 'login_required', 401);
    expect(await recordExists(first)).toBe(false);
    expect((await userWith(second)).status).toBe(200);
    expect((await client.post(`${gw.url}/auth/logout`, { headers: csrf })).status).toBe(200);
    for (const cookie of [first, second]) expect((await userWith(cookie)).status).toBe(401);
  });

  // Fails in most runs (4 of 5 here; test/unit/session/registry-rivals.test.ts pins it) if, in
  // src/session/succession.ts rivals, the step per pair is skipped: each of two callbacks at once
  // read the other's note before it was written, and both sessions lived (found by review). It
  // also failed in some runs (1 of 3 in one count; test/unit/session/registry-end.test.ts pins
  // it) before records.ts WRITE_RECORD consulted the end's note: the session ended by the other
  // callback was saved back as its own answer ended.
  it('two tabs whose callbacks come back at once, with no session yet: one of the two sessions lives', async () => {
    const client = new BrowserClient();
    const [callbackA, callbackB] = [await loginAgain(client), await loginAgain(client)];
    // Both go out before either answer is taken in: each carries the other's login cookie.
    const answers = await Promise.all([callbackA, callbackB].map((callback) => client.get(callback, { crossSite: true })));
    const cookies = answers.map((answer) => {
      expect(answer.status).toBe(302);
      const set = answer.headers.getSetCookie().find((c) => c.startsWith(`${cookieName()}=`)) as string;
      return set.slice(cookieName().length + 1).split(';')[0] as string;
    });
    expect(new Set(cookies).size).toBe(2);
    const alive = await Promise.all(cookies.map(async (cookie) => (await userWith(cookie)).status === 200));
    expect(alive.filter(Boolean)).toHaveLength(1);
  });

  // Fails if, in src/session/succession.ts rivals, the user is not compared (`of === user` →
  // `true`): a login cookie of another's sign-in, planted in a browser (cookie tossing from
  // a sibling domain, where __Host- is not in use), let that sign-in end the browser's session.
  it("another user's sign-in, whose login cookie was planted in this browser, ends nothing of it", async () => {
    const attacker = new BrowserClient();
    const { authorizeUrl } = await startLogin(attacker, gw.url);
    const planted = attacker.cookieDetails(gw.url).find((c) => c.name.startsWith(`${gw.config.derived.loginCookieName}.`));
    expect(planted).toBeDefined();
    const victim = new BrowserClient();
    victim.setCookie(gw.url, planted?.name as string, planted?.value as string, { sameSite: 'lax' });
    await signIn(victim, gw.url);
    const kept = sessionCookie(victim);
    const callback = await completeAtProvider(attacker, authorizeUrl, { user: 'bob', password: 'bob-password' });
    expect((await attacker.get(callback, { crossSite: true })).status).toBe(302);
    expect((await userWith(kept)).status).toBe(200);
  });

  // Fails if, in src/http/auth-routes.ts callback, the `.catch` after `registry.supersede(...)` is
  // removed: a sign-in whose session was already saved answered 503, its cookie set but the
  // browser sent to an error page instead of returnTo.
  it('a succession Redis refuses to record does not fail the sign-in: it completes, and a warning says so', async () => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    const old = sessionCookie(client);
    // A hash where the replaced session's successor belongs: Redis answers the succession WRONGTYPE.
    const successor = gw.runtime.keys.successor(digest(sessionIdFromCookie(old)));
    await gw.runtime.redis.hset(successor, 'not', 'a string');
    try {
      const fresh = await comeBack(client, await loginAgain(client));
      expect(fresh).not.toBe(old);
      expect((await userWith(fresh)).status).toBe(200);
      const lines = gw.logs.filter((l) => l.includes('login_succession_failed'));
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0] as string)).toMatchObject({ level: 40, event: 'login_succession_failed' });
      expectNoSecretIn(lines[0] as string, { 'old cookie': sessionIdFromCookie(old), 'new cookie': sessionIdFromCookie(fresh) }, 'the warning');
    } finally {
      await gw.runtime.redis.del(successor);
    }
  });
});
