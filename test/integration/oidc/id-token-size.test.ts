/**
 * An ID token past MAX_ID_TOKEN_LENGTH (64 KiB) is refused at sign-in: a profile field a user
 * may set at the provider (a 300 KB name) made a session record of almost 1 MB, read whole on
 * every call and cached per session (found by red team). One under it signs in. A refresh
 * whose ID token has grown past it (the field set after sign-in) keeps the session and the
 * sign-in's ID token: the stored set is read on every call too.
 *
 * Mutations that fail this file (checked by hand): src/oidc/flows.ts completeAuthorization, the
 * `if (response.id_token.length > MAX_ID_TOKEN_LENGTH)` check made `if (false)` (sign-in
 * case); src/oidc/granted.ts granted(), `response.id_token.length <= MAX_ID_TOKEN_LENGTH` made `true` (refresh case).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock } from '../../support/gateway.js';
import { tokensOfSession } from '../../support/assertions.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

let stack: Stack;
let upstream: Upstream;
const clock = createTestClock();
const user = (id: string, name: string) => ({ id, password: `${id}-password`, claims: { name, email: `${id}@example.com` } });
const grows = user('grows', 'z');

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startStack({
    clock,
    provider: { users: [user('big', 'x'.repeat(70_000)), user('fair', 'y'.repeat(20_000)), grows] },
    config: { routes: [{ path: '/api', target: upstream.url, auth: 'user' }] },
  });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

it('refuses a sign-in whose ID token is larger than 64 KiB: no session, a 4xx', async () => {
  const client = new BrowserClient();
  const result = await signIn(client, stack.gateway.url, { user: 'big', password: 'big-password' });
  expect(result.final.status).toBe(400);
  expect(client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName]).toBeUndefined();
  expect((await client.get(`${stack.gateway.url}/auth/user`, { headers: { 'x-csrf': '1' } })).status).toBe(401);
});

it('signs in with a large ID token under the limit', async () => {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url, { user: 'fair', password: 'fair-password' });
  const me = await client.get(`${stack.gateway.url}/auth/user`, { headers: { 'x-csrf': '1' } });
  expect(me.status).toBe(200);
  expect(me.json<{ claims: { name: string } }>().claims.name).toHaveLength(20_000);
});

it('keeps the session and the sign-in ID token when a refresh answers one past 64 KiB; takes one under it', async () => {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url, { user: 'grows', password: 'grows-password' });
  const cookie = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
  const signedIn = await tokensOfSession(stack.gateway, cookie);
  const refreshed = async (name: string) => {
    grows.claims.name = name;
    const before = await tokensOfSession(stack.gateway, cookie);
    clock.advance((before?.expiresAt as number) - Math.floor(clock.now() / 1000) + 1);
    expect((await client.get(`${stack.gateway.url}/api/who`, { headers: { 'x-csrf': '1' } })).status).toBe(200);
    const after = await tokensOfSession(stack.gateway, cookie);
    expect(after?.accessToken).not.toBe(before?.accessToken);
    return after;
  };

  const grown = await refreshed('x'.repeat(70_000));
  expect(grown?.idToken).toBe(signedIn?.idToken);

  const fair = await refreshed('y'.repeat(20_000));
  expect(fair?.idToken).not.toBe(signedIn?.idToken);
  expect(fair?.idToken?.length).toBeGreaterThan(20_000);
});
