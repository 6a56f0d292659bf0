/**
 * Redis that answers what the gateway did not write (found by the Redis red team): someone with
 * write access to Redis but no key. A tampered record reads as signed out, never as another
 * session, and never stops the browser from signing out or in again; an index entry copied from
 * another user's index lists and ends nothing. Also: Redis out of memory, flushed, its scripts
 * flushed, turned read-only. Real gateway, provider, upstream and a redis-server of its own.
 *
 * Mutation checks (by hand, once):
 * - src/session/registry.ts list: `userOf(stored) !== user ||` dropped from the prune test:
 *   both "index entries" tests fail (bob's session listed; alice's DELETE ended it, 204).
 * - src/session/store.ts get: `stored && isStoredCookie(stored.cookie)` → `stored`: the four
 *   cookie-member tests fail (500 server_error).
 * - src/session/records.ts load: `if (wrongType(err)) return undefined;` removed, or view's
 *   `if (wrongType(err)) return UNREADABLE_VIEW;`: "a session key of the wrong type" fails (503
 *   on /auth/user, or on the proxied call).
 *
 * Not covered: a `successor:` note planted for a session ends, at its logout, whatever session
 * it names. Notes are not authenticated; whoever can write them can delete records as well.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import type { TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { startOwnRedisStack, type OwnRedisStack } from '../../support/own-redis-stack.js';
import { expectErrorBody, revokedAtProvider, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { digest } from '../../../src/redis/keys.js';
import { userDigest } from '../../../src/session/registry.js';

const csrf = { 'x-csrf': '1' };

let stack: OwnRedisStack;
let provider: TestProvider;
let gw: TestGateway;

beforeAll(async () => {
  stack = await startOwnRedisStack({ route: (target) => ({ path: '/api', target, auth: 'user' }), commandTimeoutMs: 1000 });
  ({ provider, gw } = stack);
});

afterAll(() => stack?.close());

interface Session {
  client: BrowserClient;
  cookie: string;
  digest: string;
  key: string;
  user: string;
}

async function signedIn(user: string): Promise<Session> {
  const client = new BrowserClient();
  await signIn(client, gw.url, { user, password: `${user}-password` });
  const cookie = client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
  const d = digest(sessionIdFromCookie(cookie));
  return { client, cookie, digest: d, key: gw.runtime.keys.session(d), user };
}

const userKey = (sub: string) => gw.runtime.keys.userSessions(userDigest(provider.issuer, sub));

describe('index entries that point at another user’s session', () => {
  /** alice and bob signed in; bob's index entry (handle -> session digest) copied into alice's index by a Redis writer. */
  async function planted() {
    const alice = await signedIn('alice');
    const bob = await signedIn('bob');
    const me = (await alice.client.get(`${gw.url}/auth/user`, { headers: csrf })).json<{ sub: string }>();
    const bobMe = (await bob.client.get(`${gw.url}/auth/user`, { headers: csrf })).json<{ sub: string }>();
    expect(me.sub).not.toBe(bobMe.sub);
    const bobIndex = await gw.runtime.redis.hgetall(userKey(bobMe.sub));
    const [bobHandle, bobDigest] = Object.entries(bobIndex).find(([, v]) => v === bob.digest) as [string, string];
    await gw.runtime.redis.hset(userKey(me.sub), bobHandle, bobDigest);
    return { alice, bob, bobHandle, me };
  }

  it("GET /auth/sessions does not list bob's session (its sealed createdAt / userAgent) planted in alice's index", async () => {
    const { alice, bobHandle } = await planted();
    const listed = (await alice.client.get(`${gw.url}/auth/sessions`, { headers: csrf })).json<Array<{ id: string }>>();
    expect(listed.map((s) => s.id)).not.toContain(bobHandle);
  });

  it("DELETE /auth/sessions/{id} by alice does not end (and revoke) bob's session planted in alice's index", async () => {
    const { alice, bob, bobHandle } = await planted();
    const bobTokens = await tokensOfSession(gw, bob.cookie);
    const del = await alice.client.request('DELETE', `${gw.url}/auth/sessions/${bobHandle}`, { headers: csrf });
    expect(del.status).toBe(404);
    expect((await bob.client.get(`${gw.url}/api/echo`, { headers: csrf })).status).toBe(200);
    expect((await provider.introspect(bobTokens?.refreshToken as string)).active).toBe(true);
  });
});

describe('a record whose unsealed parts were edited', () => {
  it('a record without its `cookie` member: /auth/user, /auth/logout and a new sign-in never answer 500', async () => {
    const s = await signedIn('alice');
    const raw = (await gw.runtime.redis.get(s.key)) as string;
    const { tv, tok, cookie: _cookie, ...rest } = JSON.parse(raw) as Record<string, unknown>;
    await gw.runtime.redis.set(s.key, JSON.stringify({ tv, tok, ...rest }), 'KEEPTTL');

    expectErrorBody(await s.client.get(`${gw.url}/auth/user`, { headers: csrf }), 'login_required', 401);
    const out = await s.client.post(`${gw.url}/auth/logout`, { headers: csrf });
    expect(out.status).toBe(200);
  });

  it('a record with `"cookie":null` and no auth (no key needed to write it) reads as signed out, not 500', async () => {
    const s = await signedIn('alice');
    await gw.runtime.redis.set(s.key, '{"tv":0,"tok":"","cookie":null}', 'KEEPTTL');
    expectErrorBody(await s.client.get(`${gw.url}/auth/user`, { headers: csrf }), 'login_required', 401);
  });

  it('the same browser can sign in again over such a record', async () => {
    const s = await signedIn('alice');
    await gw.runtime.redis.set(s.key, '{"tv":0,"tok":""}', 'KEEPTTL');
    await signIn(s.client, gw.url, { user: 'alice', password: 'alice-password' });
    expect((await s.client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
  });
});

describe('cookie members of the wrong shape (unsealed, writable without a key)', () => {
  it.each([
    ['a string', '"x"'],
    ['maxAge not a number', '{"maxAge":"x","originalMaxAge":1}'],
  ])('cookie %s: /auth/user reads as signed out (401), never 500', async (_name, cookie) => {
    const s = await signedIn('alice');
    const raw = (await gw.runtime.redis.get(s.key)) as string;
    const { tv, tok, cookie: _c, ...rest } = JSON.parse(raw) as Record<string, unknown>;
    const body = JSON.stringify({ tv, tok, ...rest });
    await gw.runtime.redis.set(s.key, `${body.slice(0, -1)},"cookie":${cookie}}`, 'KEEPTTL');
    expectErrorBody(await s.client.get(`${gw.url}/auth/user`, { headers: csrf }), 'login_required', 401);
  });
});

describe('a session key of the wrong type (a tampered record)', () => {
  it('reads as signed out (401), and the browser can log out and sign in again', async () => {
    const s = await signedIn('alice');
    await gw.runtime.redis.del(s.key);
    await gw.runtime.redis.hset(s.key, 'x', 'y');
    // The cookie sent as it was each time: the first 401 clears it in the jar.
    const withCookie = { ...csrf, cookie: `${gw.config.derived.sessionCookieName}=${s.cookie}` };
    for (const path of ['/auth/user', '/api/echo', '/auth/sessions']) {
      const res = await fetch(`${gw.url}${path}`, { headers: withCookie });
      expect({ path, status: res.status, error: ((await res.json()) as { error: string }).error }).toEqual({ path, status: 401, error: 'login_required' });
    }
    expect((await s.client.post(`${gw.url}/auth/logout`, { headers: csrf })).status).toBe(200);
    await signIn(s.client, gw.url, { user: 'alice', password: 'alice-password' });
    expect((await s.client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
  });
});

describe('Redis out of memory (maxmemory reached, noeviction)', () => {
  afterEach(async () => {
    await gw.runtime.redis.config('SET', 'maxmemory', '0');
  });

  it('a logout refused with OOM leaves the session whole: its retry revokes the tokens and sends the browser to the provider', async () => {
    const s = await signedIn('alice');
    const tokens = await tokensOfSession(gw, s.cookie);
    await gw.runtime.redis.config('SET', 'maxmemory', '1');
    const first = await s.client.post(`${gw.url}/auth/logout`, { headers: csrf });
    await gw.runtime.redis.config('SET', 'maxmemory', '0');
    // Either the logout completed (Redis lets a script that has written go on), or it answered
    // 503 and its retry completes it as a first try would have: never a 500.
    expect([200, 503]).toContain(first.status);
    const done = first.status === 200 ? first : await s.client.post(`${gw.url}/auth/logout`, { headers: csrf });
    expect(done.status).toBe(200);
    const url = done.json<{ logoutUrl: string }>().logoutUrl;
    expect(url).not.toBe('/');
    expect(new URL(url).searchParams.get('id_token_hint')).toBe(tokens?.idToken);
    await revokedAtProvider(provider, tokens?.refreshToken);
  }, 30_000);

  it('proxied calls of a signed-in session keep working while Redis refuses writes', async () => {
    const s = await signedIn('alice');
    await gw.runtime.redis.config('SET', 'maxmemory', '1');
    expect((await s.client.get(`${gw.url}/api/echo`, { headers: csrf })).status).toBe(200);
  });

  it('a sign-in while Redis refuses writes is a clear 503, never a 500', async () => {
    await gw.runtime.redis.config('SET', 'maxmemory', '1');
    const client = new BrowserClient();
    const res = await client.get(`${gw.url}/auth/login`, { headers: { accept: 'application/json' } });
    expect(res.status).toBe(503);
  });
});

describe('Redis flushed (restarted empty) mid-session', () => {
  it('the browser reads as signed out (401), logs out cleanly, and signs in again', async () => {
    const s = await signedIn('alice');
    await gw.runtime.redis.flushall();
    expectErrorBody(await s.client.get(`${gw.url}/api/echo`, { headers: csrf }), 'login_required', 401);
    expectErrorBody(await s.client.get(`${gw.url}/auth/user`, { headers: csrf }), 'login_required', 401);
    expect((await s.client.get(`${gw.url}/auth/sessions`, { headers: csrf })).status).toBe(401);
    const out = await s.client.post(`${gw.url}/auth/logout`, { headers: csrf });
    expect(out.status).toBe(200);
    await signIn(s.client, gw.url, { user: 'alice', password: 'alice-password' });
    expect((await s.client.get(`${gw.url}/api/echo`, { headers: csrf })).status).toBe(200);
  });
});

describe('Lua scripts after SCRIPT FLUSH', () => {
  it('logout (TAKE script) and sign-in (WRITE_RECORD) still work', async () => {
    const s = await signedIn('alice');
    await gw.runtime.redis.script('FLUSH');
    expect((await s.client.post(`${gw.url}/auth/logout`, { headers: csrf })).status).toBe(200);
    await gw.runtime.redis.script('FLUSH');
    await signIn(s.client, gw.url, { user: 'alice', password: 'alice-password' });
    expect((await s.client.get(`${gw.url}/api/echo`, { headers: csrf })).status).toBe(200);
  });
});

describe('Redis turned read-only (a replica)', () => {
  afterEach(async () => {
    await gw.runtime.redis.call('REPLICAOF', 'NO', 'ONE');
  });

  it('answers 503 (never 500), keeps the cookie, and the session works again once writable', async () => {
    const s = await signedIn('alice');
    // A replica of a master that is not there: keeps its data, refuses writes (READONLY).
    await gw.runtime.redis.call('REPLICAOF', '127.0.0.1', '1');
    for (const path of ['/api/echo', '/auth/user', '/auth/sessions']) {
      const res = await s.client.get(`${gw.url}${path}`, { headers: csrf });
      expect([200, 503]).toContain(res.status);
      if (res.status === 503) expectErrorBody(res, 'session_store_unavailable', 503);
    }
    const out = await s.client.post(`${gw.url}/auth/logout`, { headers: csrf });
    expect([503]).toContain(out.status);
    expect(s.client.cookies(gw.url)[gw.config.derived.sessionCookieName]).toBe(s.cookie);
    await gw.runtime.redis.call('REPLICAOF', 'NO', 'ONE');
    expect((await s.client.get(`${gw.url}/api/echo`, { headers: csrf })).status).toBe(200);
  });
});
