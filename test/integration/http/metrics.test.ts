/**
 * GET /metrics (SPEC §3): Prometheus text, labelled only by configured names, never by user
 * data or credentials.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock, type TestGateway } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectNoSecretIn, tokensOfSession } from '../../support/assertions.js';

const clock = createTestClock();
let stack: Stack;
let upstream: Upstream;
let gw: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startStack({ config: { routes: [{ path: '/api', target: upstream.url, auth: 'user' }] }, clock });
  gw = stack.gateway;
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

it('counts requests by configured route and status, latency, refreshes and logins, without user data', async () => {
  const client = new BrowserClient();
  await signIn(client, gw.url);
  const cookie = client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
  await client.get(`${gw.url}/api/echo/some-user-specific-path-42`, { headers: { 'x-csrf': '1' } });
  clock.advance(3600);
  await client.get(`${gw.url}/api/echo`, { headers: { 'x-csrf': '1' } });
  await client.get(`${gw.url}/api/echo`); // 403
  const tokens = await tokensOfSession(gw, cookie);

  const res = await client.get(`${gw.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/text\/plain/);
  const text = res.text;
  expect(text).toMatch(/bff_http_requests_total\{route="\/api",method="GET",status="200"\} 2/);
  expect(text).toMatch(/bff_http_requests_total\{route="\/api",method="GET",status="403"\} 1/);
  expect(text).toMatch(/bff_http_requests_total\{route="\/auth\/callback",method="GET",status="302"\} 1/);
  expect(text).toMatch(/bff_http_request_duration_seconds_bucket\{le="[^"]+",route="\/api"\}/);
  expect(text).toMatch(/bff_token_refresh_total\{outcome="success"\} 1/);
  expect(text).toMatch(/bff_login_transactions_total\{outcome="signed_in"\} 1/);
  expect(text).toMatch(/bff_redis_command_duration_seconds_count\{operation="session_read"\} 2/);
  expect(text).not.toContain('some-user-specific-path-42');
  expect(text).not.toContain('alice');
  expectNoSecretIn(text, { accessToken: tokens?.accessToken, refreshToken: tokens?.refreshToken, cookie }, '/metrics');
});
