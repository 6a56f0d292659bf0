/**
 * Redis never sees a secret in plaintext, in any command (found held by red team; kept as a
 * guard): MONITOR over a whole life with DPoP, token exchange, a client-credentials route,
 * /auth/sessions, DELETE /auth/sessions/{id}, logout and a back-channel logout; every command
 * (keys, values, script arguments, PUBLISH payloads) is searched for every token, code,
 * verifier, state, nonce, cookie, session ID and config secret seen. reliability/
 * no-secrets-leak.test.ts reads the values stored; this reads what was sent.
 *
 * Mutation that fails it (checked by hand): src/redis/keys.ts digest() returning its input
 * (the session ID then names the session's keys).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock } from '../../support/gateway.js';
import { startStack, TOKEN_EXCHANGE, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { redisUrlForTests } from '../../support/redis-server.js';
import { sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { BACKCHANNEL_LOGOUT_EVENT } from '../../support/oidc-provider.js';
import { eventually } from '../../support/wait.js';
import { startRedisMonitor, type RedisMonitor } from '../../support/redis-monitor.js';
import { digest } from '../../../src/redis/keys.js';

const csrf = { 'x-csrf': '1' };
const API = 'https://api.example';
const LEDGER = 'https://ledger.example';
const clock = createTestClock();
let stack: Stack;
let upstream: Upstream;
let monitor: RedisMonitor;

beforeAll(async () => {
  upstream = await startUpstream();
  monitor = await startRedisMonitor(redisUrlForTests());
  stack = await startStack({
    clock,
    client: { grant_types: ['authorization_code', 'refresh_token', 'client_credentials', TOKEN_EXCHANGE] },
    provider: {
      ttl: { AccessToken: 60 },
      scopes: { 'api:read': 'r', 'ledger:read': 'l' },
      resourceServers: { [API]: { scope: 'api:read', accessTokenTTL: 60 }, [LEDGER]: { scope: 'ledger:read' } },
      defaultResource: API,
    },
    config: {
      scopes: ['openid', 'profile', 'offline_access', 'api:read'],
      extraAuthParams: { resource: API },
      oidc: { dpop: true },
      routes: [
        { path: '/api', target: upstream.url, auth: 'user' },
        { path: '/ledger', target: upstream.url, auth: 'user', tokenExchange: { audience: LEDGER, scope: 'ledger:read' } },
        { path: '/service', target: upstream.url, auth: 'client' },
      ],
    },
  });
}, 60_000);

afterAll(async () => {
  monitor?.stop();
  await stack?.close();
  await upstream?.close();
});

it('no secret in any Redis command of a whole life', async () => {
  const gw = stack.gateway;
  const secrets: Record<string, string | undefined> = {
    'client secret': 'bff-test-secret-0123456789abcdef',
    'cookie secret': gw.config.session.secrets[0],
    'encryption key': gw.config.session.encryptionKeys[0],
  };
  const a = new BrowserClient();
  const signed = await signIn(a, gw.url);
  const q = new URL(signed.callbackUrl).searchParams;
  const authz = new URL(signed.authorizeUrl).searchParams;
  Object.assign(secrets, { code: q.get('code') ?? undefined, state: q.get('state') ?? undefined, nonce: authz.get('nonce') ?? undefined });
  const cookie = a.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
  Object.assign(secrets, { cookie, 'session ID': sessionIdFromCookie(cookie) });
  const statuses: number[] = [];
  for (const p of ['/api/echo', '/ledger/echo', '/service/echo', '/auth/sessions']) statuses.push((await a.get(`${gw.url}${p}`, { headers: csrf })).status);
  clock.advance(120);
  for (const p of ['/api/echo', '/ledger/echo', '/service/echo']) statuses.push((await a.get(`${gw.url}${p}`, { headers: csrf })).status);
  const t = await tokensOfSession(gw, cookie);
  Object.assign(secrets, { at: t?.accessToken, rt: t?.refreshToken, idt: t?.idToken, 'dpop d': (t as { dpopKey?: { d?: string } })?.dpopKey?.d });
  for (const [k, v] of Object.entries(t?.exchanged ?? {})) secrets[`exchanged ${k}`] = v?.accessToken;
  // second browser: ended by DELETE from the first
  const b = new BrowserClient();
  await signIn(b, gw.url);
  const list = (await a.get(`${gw.url}/auth/sessions`, { headers: csrf })).json<Array<{ id: string; current: boolean }>>();
  const other = list.find((s) => !s.current);
  if (other) statuses.push((await a.request('DELETE', `${gw.url}/auth/sessions/${other.id}`, { headers: csrf })).status);
  // third browser: ended by a back-channel logout
  const c = new BrowserClient();
  await signIn(c, gw.url);
  const logoutToken = await stack.provider.signLogoutToken({ sub: (await c.get(`${gw.url}/auth/user`, { headers: csrf })).json<{ sub: string }>().sub, events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } });
  secrets['logout token'] = logoutToken;
  statuses.push((await new BrowserClient().post(`${gw.url}/auth/backchannel-logout`, { form: { logout_token: logoutToken } })).status);
  statuses.push((await a.post(`${gw.url}/auth/logout`, { headers: csrf })).status);
  // Not blind: every step answered as it should, and the monitor saw this life's commands.
  expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 204, 200, 200]);
  expect(secrets['dpop d']).toEqual(expect.any(String));
  expect(Object.keys(t?.exchanged ?? {})).toHaveLength(1);
  const sessionKey = gw.runtime.keys.session(digest(secrets['session ID'] as string));
  await eventually('the monitor caught up', 5_000, async () => monitor.lines.some((line) => line.includes(sessionKey)) && monitor.lines.some((line) => /backchannel|jti:/.test(line)));
  const found: string[] = [];
  for (const line of monitor.lines) for (const [n, v] of Object.entries(secrets)) if (v && line.includes(v)) found.push(`${n}: ${line.slice(0, 160).split(v).join('<x>')}`);
  expect(found).toEqual([]);
}, 120_000);
