/**
 * A cached exchanged token (RFC 8693) answers one exchange request: when a route's
 * tokenExchange changes (a new deployment with another audience or scope, sessions living on in
 * Redis), the next call exchanges again instead of sending the token issued for the old
 * audience or scope. Two gateway instances on one Redis stand for the old and the new
 * deployment; real oidc-provider and upstream.
 *
 * Mutation that fails this file (checked by hand): in src/proxy/token-exchange.ts
 * exchangedToken, return `tokens.exchanged?.[route.path]` without comparing exchangedFor.
 */
import { decodeJwt } from 'jose';
import type { Config } from '../../../src/config/load.js';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startExchangeStack, TOKEN_EXCHANGE as EXCHANGE, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const csrf = { 'x-csrf': '1' };
const API = 'https://api.example';
const LEDGER = 'https://ledger.example';
const AUDIT = 'https://audit.example';
const clock = createTestClock();

let stack: Stack;
let upstream: Upstream;
let next: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startExchangeStack({
    clock,
    apis: { [API]: { 'api:read': 'Read the API' }, [LEDGER]: { 'ledger:read': 'Read the ledger' }, [AUDIT]: { 'audit:read': 'Read the audit log' } },
    scopes: ['api:read'],
    routes: [{ path: '/reports', target: upstream.url, auth: 'user', tokenExchange: { audience: LEDGER, scope: 'ledger:read' } }],
  });
  // The next deployment: the same route path now exchanges for another API.
  const config: Config = {
    ...stack.config,
    routes: stack.config.routes.map((r) => (r.path === '/reports' ? { ...r, tokenExchange: { audience: AUDIT, scope: 'audit:read' } } : r)),
  };
  next = await startTestGateway(config, undefined, { clock });
});

afterAll(async () => {
  await next?.close();
  await stack?.close();
  await upstream?.close();
});

const sentToken = () => decodeJwt(String(upstream.requests.at(-1)?.headers.authorization ?? '').replace(/^Bearer /, ''));

it("exchanges again when the route's tokenExchange changed, never sending the old audience's token", async () => {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  const cookieName = stack.config.derived.sessionCookieName;
  client.setCookie(next.url, cookieName, client.cookies(stack.gateway.url)[cookieName] as string);
  const exchanges = () => stack.provider.counters.grants[EXCHANGE] ?? 0;

  expect((await client.get(`${stack.gateway.url}/reports/x`, { headers: csrf })).status).toBe(200);
  expect(sentToken()).toMatchObject({ aud: LEDGER, scope: 'ledger:read' });
  const before = exchanges();

  expect((await client.get(`${next.url}/reports/x`, { headers: csrf })).status).toBe(200);
  expect(sentToken()).toMatchObject({ aud: AUDIT, scope: 'audit:read' });
  expect(exchanges()).toBe(before + 1);
  // And the new token is cached like any other: no exchange for the next call.
  expect((await client.get(`${next.url}/reports/y`, { headers: csrf })).status).toBe(200);
  expect(exchanges()).toBe(before + 1);
});
