/**
 * When an upstream's 401 counts as a refused token (SPEC §4: one refresh, one retry): only a
 * Bearer or DPoP challenge whose error is exactly invalid_token, read by the one
 * WWW-Authenticate reader. A lying or sloppy upstream that writes `error=invalid_token` inside a
 * quoted realm, or an error that merely starts with it, gets its 401 passed through: no refresh
 * at the provider, no second call. Real gateway, oidc-provider and upstream.
 *
 * Mutation that fails this file (checked by hand): in src/proxy/upstream-call.ts rejectsToken, go
 * back to `/error="?invalid_token/i.test(String(proxyRes.headers['www-authenticate'] ?? ''))`.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
let challenge = '';
let upstream: Upstream;
let stack: Stack;

beforeAll(async () => {
  upstream = await startUpstream();
  upstream.setHandler((req, res) => {
    req.resume();
    res.writeHead(401, { 'www-authenticate': challenge, 'content-type': 'text/plain' }).end('refused');
  });
  stack = await startStack({ clock, config: { routes: [{ path: '/api', target: upstream.url, auth: 'user' }] } });
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

async function callWith(header: string) {
  challenge = header;
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  const refreshes = stack.provider.counters.grants.refresh_token ?? 0;
  const calls = upstream.requests.length;
  const res = await client.get(`${stack.gateway.url}/api/x`, { headers: csrf });
  return { res, refreshed: (stack.provider.counters.grants.refresh_token ?? 0) - refreshes, upstreamCalls: upstream.requests.length - calls };
}

it.each([
  ['invalid_token inside a quoted realm', 'Bearer realm="error=invalid_token"'],
  ['an error that only starts with invalid_token', 'Bearer error="invalid_token_type"'],
  ['invalid_token in another scheme', 'Basic realm="x", Custom error="invalid_token"'],
])('passes a 401 with %s through, without a refresh or a second call', async (_what, header) => {
  const { res, refreshed, upstreamCalls } = await callWith(header);
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate')).toBe(header);
  expect(refreshed).toBe(0);
  expect(upstreamCalls).toBe(1);
});

it.each([
  ['a Bearer challenge after another, unquoted', 'Basic realm="x", Bearer error=invalid_token'],
  ['a DPoP challenge', 'DPoP algs="ES256", error="invalid_token"'],
])('refreshes once and retries once for %s', async (_what, header) => {
  const { res, refreshed, upstreamCalls } = await callWith(header);
  expect(res.status).toBe(401);
  expect(refreshed).toBe(1);
  expect(upstreamCalls).toBe(2);
});
