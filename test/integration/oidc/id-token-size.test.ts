/**
 * An ID token past MAX_ID_TOKEN_LENGTH (64 KiB) is refused at sign-in: a profile field a user
 * may set at the provider (a 300 KB name) made a session record of almost 1 MB, read whole on
 * every call and cached per session (found by red team). One under it signs in.
 *
 * Mutation that fails this file (checked by hand): src/oidc/flows.ts completeAuthorization, the
 * `if (response.id_token.length > MAX_ID_TOKEN_LENGTH)` check made `if (false)`.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startStack, type Stack } from '../../support/stack.js';

let stack: Stack;
const user = (id: string, name: string) => ({ id, password: `${id}-password`, claims: { name, email: `${id}@example.com` } });

beforeAll(async () => {
  stack = await startStack({ provider: { users: [user('big', 'x'.repeat(70_000)), user('fair', 'y'.repeat(20_000))] } });
}, 60_000);
afterAll(async () => {
  await stack?.close();
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
