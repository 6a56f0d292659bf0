/**
 * The session record's `auth` part (scopes, subject, sign-in time) is sealed like the tokens:
 * someone who can write to Redis but holds no encryption key cannot grant a scope, move the
 * absolute timeout, or lend one session's identity to another. A record whose auth does not
 * verify reads as signed out, and the upstream is never called. Real gateway, provider,
 * Redis and upstream.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { digest } from '../../../src/redis/keys.js';
import { expectErrorBody, sessionIdFromCookie } from '../../support/assertions.js';
import { startStack, type Stack } from '../../support/stack.js';
import type { TestGateway } from '../../support/gateway.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

let stack: Stack;
let gw: TestGateway;
let upstream: Upstream;
const csrf = { 'x-csrf': '1' };

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startStack({
    config: {
      routes: [
        { path: '/api/admin', target: upstream.url, auth: 'user', scopes: ['admin:write'] },
        { path: '/api', target: upstream.url, auth: 'user' },
      ],
    },
  });
  gw = stack.gateway;
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

interface SignedIn {
  /** GET with this session's cookie, from a browser that keeps it whatever the answer says. */
  get(path: string): ReturnType<BrowserClient['get']>;
  key: string;
}

async function signedIn(user = 'alice'): Promise<SignedIn> {
  const client = new BrowserClient();
  await signIn(client, gw.url, { user, password: `${user}-password` });
  const cookie = client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
  return {
    get(path) {
      const browser = new BrowserClient();
      browser.setCookie(gw.url, gw.config.derived.sessionCookieName, cookie, { sameSite: 'strict' });
      return browser.get(`${gw.url}${path}`, { headers: csrf });
    },
    key: gw.runtime.keys.session(digest(sessionIdFromCookie(cookie))),
  };
}

async function rawRecord(key: string): Promise<Record<string, unknown>> {
  return JSON.parse((await gw.runtime.redis.get(key)) as string) as Record<string, unknown>;
}

/** What a Redis writer without the keys can do: rewrite the record, keeping its TTL. */
async function overwrite(key: string, record: Record<string, unknown>): Promise<void> {
  // The token head stays first, as the gateway's Lua scripts expect.
  const { tv, tok, ...rest } = record;
  await gw.runtime.redis.set(key, JSON.stringify({ tv, tok, ...rest }), 'KEEPTTL');
}

describe('a Redis write to a session record', () => {
  it('that adds a scope to auth makes the session read as signed out; the upstream is never called', async () => {
    const session = await signedIn();
    const { key } = session;
    expect((await session.get('/api/echo')).status).toBe(200);
    expectErrorBody(await session.get('/api/admin/echo'), 'insufficient_scope', 403);
    const me = (await session.get('/auth/user')).json() as { sub: string; scopes: string[] };

    const record = await rawRecord(key);
    // 0.3.0 kept auth as plain JSON: add the scope to it. Sealed, the writer can only put a
    // plausible plain auth of its own in its place.
    const forged =
      typeof record.auth === 'object' && record.auth !== null
        ? { ...(record.auth as Record<string, unknown>), scopes: [...me.scopes, 'admin:write'] }
        : { handle: 'forged', sub: me.sub, iss: stack.provider.issuer, claims: {}, scopes: [...me.scopes, 'admin:write'], createdAt: Date.now() };
    await overwrite(key, { ...record, auth: forged });

    upstream.reset();
    expectErrorBody(await session.get('/api/admin/echo'), 'login_required', 401);
    expectErrorBody(await session.get('/api/echo'), 'login_required', 401);
    expect(upstream.requests).toHaveLength(0);
    expectErrorBody(await session.get('/auth/user'), 'login_required', 401);
  });

  it("that copies another session's auth into it makes it read as signed out", async () => {
    const alice = await signedIn('alice');
    const bob = await signedIn('bob');
    expect((await alice.get('/api/echo')).status).toBe(200);

    const bobsAuth = (await rawRecord(bob.key)).auth;
    await overwrite(alice.key, { ...(await rawRecord(alice.key)), auth: bobsAuth });

    upstream.reset();
    expectErrorBody(await alice.get('/api/echo'), 'login_required', 401);
    expect(upstream.requests).toHaveLength(0);
    expectErrorBody(await alice.get('/auth/user'), 'login_required', 401);
    // Bob's own session is untouched.
    expect((await bob.get('/auth/user')).status).toBe(200);
  });

  it('is judged on the stored value: the untouched record, written back, reads as signed in again', async () => {
    const session = await signedIn();
    const { key } = session;
    const withCookie = () => session.get('/api/echo');
    expect((await withCookie()).status).toBe(200);
    const original = (await gw.runtime.redis.get(key)) as string;
    const sealed = (await rawRecord(key)).auth as string;
    // One character of the sealed value changed (not the last: its low bits may be padding).
    const flipped = `${sealed.slice(0, 20)}${sealed[20] === 'A' ? 'B' : 'A'}${sealed.slice(21)}`;
    await overwrite(key, { ...(await rawRecord(key)), auth: flipped });
    expectErrorBody(await withCookie(), 'login_required', 401);

    await gw.runtime.redis.set(key, original, 'KEEPTTL');
    expect((await withCookie()).status).toBe(200);
  });
});
