/**
 * Revocation (RFC 7009) of a session's derived access tokens at its end: the RFC 8707 resource
 * tokens and the RFC 8693 exchanged tokens it holds are sent to the provider's revocation
 * endpoint besides its refresh and access tokens, at POST /auth/logout, DELETE
 * /auth/sessions/{id} and back-channel logout. Best effort: a provider that is down never keeps
 * the session alive. Real oidc-provider (it records the jti of each JWT presented for
 * revocation), real Redis, real upstreams.
 *
 * Mutation that fails this file (checked by hand): in src/oidc/revocation.ts, make
 * extraAccessTokens `return [];` (only the refresh and session access tokens are revoked).
 */
import { decodeJwt } from 'jose';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { startExchangeStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectNoSecretIn, tokensOfSession } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
const API = 'https://api.example';
const INVENTORY = 'https://inventory.example';
const LEDGER = 'https://ledger.example';
const clock = createTestClock();

let stack: Stack;
let provider: TestProvider;
let gw: TestGateway;
let upstream: Upstream;

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startExchangeStack({
    clock,
    apis: { [API]: { 'api:read': 'Read the API' }, [INVENTORY]: { 'inventory:read': 'Read inventory' }, [LEDGER]: { 'ledger:read': 'Read the ledger' } },
    scopes: ['api:read', 'inventory:read'],
    routes: [
      { path: '/inventory', target: upstream.url, auth: 'user', resource: INVENTORY },
      { path: '/ledger', target: upstream.url, auth: 'user', tokenExchange: { audience: LEDGER, scope: 'ledger:read' } },
      { path: '/api', target: upstream.url, auth: 'user' },
    ],
  });
  ({ provider, gateway: gw } = stack);
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

/** A signed-in browser that has called a resource route and a token-exchange route. */
async function sessionWithDerivedTokens(user = 'alice') {
  const client = new BrowserClient({ userAgent: `revoke-${Math.random().toString(36).slice(2, 8)}` });
  await signIn(client, gw.url, { user, password: `${user}-password` });
  expect((await client.get(`${gw.url}/inventory/items`, { headers: csrf })).status).toBe(200);
  expect((await client.get(`${gw.url}/ledger/balance`, { headers: csrf })).status).toBe(200);
  const cookie = client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
  const tokens = await tokensOfSession(gw, cookie);
  const resource = tokens?.resources?.[INVENTORY]?.accessToken as string;
  const exchanged = tokens?.exchanged?.['/ledger']?.accessToken as string;
  expect(decodeJwt(resource).aud).toBe(INVENTORY);
  expect(decodeJwt(exchanged).aud).toBe(LEDGER);
  return { client, tokens, jtis: [decodeJwt(resource).jti, decodeJwt(exchanged).jti, decodeJwt(tokens?.accessToken as string).jti] as string[] };
}

const presented = (jtis: string[]) => jtis.every((jti) => provider.counters.revokedJwtIds.includes(jti));

it('POST /auth/logout revokes the resource and exchanged tokens too, and logs none of them', async () => {
  const { client, tokens, jtis } = await sessionWithDerivedTokens();
  expect(presented(jtis)).toBe(false);
  const res = await client.post(`${gw.url}/auth/logout`, { headers: csrf });
  expect(res.status).toBe(200);
  expect(presented(jtis)).toBe(true);
  expectNoSecretIn(gw.logs.join('\n'), {
    accessToken: tokens?.accessToken,
    refreshToken: tokens?.refreshToken,
    resource: tokens?.resources?.[INVENTORY]?.accessToken,
    exchanged: tokens?.exchanged?.['/ledger']?.accessToken,
  }, 'the gateway log');
});

it('DELETE /auth/sessions/{id} revokes them', async () => {
  const { client, jtis } = await sessionWithDerivedTokens();
  const list = (await client.get(`${gw.url}/auth/sessions`, { headers: csrf })).json() as Array<{ id: string; current: boolean }>;
  const current = list.find((s) => s.current);
  expect((await client.request('DELETE', `${gw.url}/auth/sessions/${current?.id}`, { headers: csrf })).status).toBe(204);
  expect(presented(jtis)).toBe(true);
});

it('back-channel logout revokes them (after its answer)', async () => {
  const { client, jtis } = await sessionWithDerivedTokens('bob');
  const res = await new BrowserClient().post(`${gw.url}/auth/backchannel-logout`, { form: { logout_token: await provider.signLogoutToken({ sub: 'bob' }) } });
  expect(res.status).toBe(200);
  await eventually('derived tokens presented for revocation', 20_000, () => presented(jtis), { intervalMs: 25 });
  expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(401);
});

it('a provider that is down never keeps the session alive: the logout ends it locally, the failure is logged once per token', async () => {
  const { client, jtis } = await sessionWithDerivedTokens();
  const failuresBefore = gw.logs.filter((l) => l.includes('"revocation_failed"')).length;
  await provider.stop();
  try {
    expect((await client.post(`${gw.url}/auth/logout`, { headers: csrf })).status).toBe(200);
  } finally {
    await provider.start();
  }
  expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(401);
  expect(presented(jtis)).toBe(false);
  // Refresh token, session access token, resource token, exchanged token: four failed calls, not retried.
  expect(gw.logs.filter((l) => l.includes('"revocation_failed"')).length - failuresBefore).toBe(4);
});
