/**
 * GET /metrics (SPEC §3): Prometheus text, labelled only by configured names, never by user
 * data or credentials.
 *
 * Mutation checks (by hand, once): src/http/endpoints.ts: drop '/events' from AUTH_ENDPOINTS →
 * "names the gateway endpoints as traces do" fails (0.5.0 counted /auth/events as "other").
 * src/runtime.ts: `createTokenVault(sealer)` (a cache of its own, not the measured one) →
 * "reports the estimated bytes" fails. src/http/proxy-routes.ts: drop the loop that sets
 * `upstreamErrors` at 0 per route and kind → "exports each route's upstream error kinds" fails.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock, type TestGateway } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectNoSecretIn, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { digest } from '../../../src/redis/keys.js';

const clock = createTestClock();
const SERVICE = 'https://service.example.test';
const csrf = { 'x-csrf': '1' };
let stack: Stack;
let upstream: Upstream;
let gw: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startStack({
    clock,
    client: { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] },
    provider: { scopes: { 'service:read': 'Read the service' }, resourceServers: { [SERVICE]: { scope: 'service:read' } } },
    config: {
      routes: [
        { path: '/api', target: upstream.url, auth: 'user' },
        { path: '/service', target: upstream.url, auth: 'client', scopes: ['service:read'], resource: SERVICE },
      ],
    },
  });
  gw = stack.gateway;
});

const scrape = async () => (await fetch(`${gw.url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
/** The number of the first line matching `pattern` (its one capture group); undefined when absent. */
const metricValue = async (pattern: RegExp) => {
  const match = pattern.exec(await scrape());
  return match ? Number(match[1]) : undefined;
};

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

it("exports each route's upstream error kinds from the start (README: every known error kind at 0), so the first errors count in a rate", async () => {
  const text = await scrape();
  const missing: string[] = [];
  for (const route of ['/api', '/service'])
    for (const kind of ['bad_gateway', 'gateway_timeout'])
      if (!new RegExp(`^bff_upstream_errors_total\\{route="${route}",kind="${kind}"\\} \\d`, 'm').test(text)) missing.push(`${route} ${kind}`);
  expect(missing).toEqual([]);
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
  expect(text).toMatch(/bff_redis_command_duration_seconds_count\{operation="session_read"\} [1-9]/);
  expect(text).toMatch(/bff_redis_command_duration_seconds_count\{operation="transaction_take"\} 1/);
  expect(text).toMatch(/bff_redis_command_duration_seconds_count\{operation="session_cas"\} 1/);
  expect(text).toMatch(/^bff_login_transactions_active 0$/m);
  expect(text).not.toContain('some-user-specific-path-42');
  expect(text).not.toContain('alice');
  expectNoSecretIn(text, { accessToken: tokens?.accessToken, refreshToken: tokens?.refreshToken, cookie }, '/metrics');
});

it('counts the login transactions in progress (kept in Redis, so shared by all instances) until they are taken or expire', async () => {
  const started = await Promise.all(
    [1, 2, 3].map(() => fetch(`${gw.url}/auth/login`, { redirect: 'manual', signal: AbortSignal.timeout(10_000) })),
  );
  expect(started.map((r) => r.status)).toEqual([302, 302, 302]);
  const gauge = () => metricValue(/^bff_login_transactions_active (\d+)$/m);
  expect(await gauge()).toBe(3);
  // Finish one of them: the callback takes its transaction.
  const client = new BrowserClient();
  await signIn(client, gw.url);
  expect(await gauge()).toBe(3);
  clock.advance(601);
  expect(await gauge()).toBe(0);
});

it('names the gateway endpoints as traces do: /auth/events, any case or trailing slash; the rest is "other"', async () => {
  const anonymous = new BrowserClient();
  // Refused either way (no session, or this client's Origin): what matters is the label.
  const events = await anonymous.get(`${gw.url}/auth/events`);
  expect(events.status).toBeGreaterThanOrEqual(400);
  const user = await anonymous.get(`${gw.url}/AUTH/User/`, { headers: csrf });
  expect(user.status).toBe(401);
  expect((await anonymous.get(`${gw.url}/auth/no-such-endpoint`)).status).toBe(404);
  const text = (await anonymous.get(`${gw.url}/metrics`)).text;
  expect(text).toContain(`bff_http_requests_total{route="/auth/events",method="GET",status="${events.status}"} 1`);
  expect(text).toContain('bff_http_requests_total{route="/auth/user",method="GET",status="401"} 1');
  expect(text).toMatch(/bff_http_requests_total\{route="other",method="GET",status="404"\} [1-9]/);
  expect(text).not.toContain('no-such-endpoint');
});

it('times the other Redis operations too, each under its own operation name', async () => {
  const text = await scrape();
  expect(text).toMatch(/bff_redis_command_duration_seconds_bucket\{le="0.001",operation="session_read"\}/);
  expect(text).toMatch(/bff_redis_command_duration_seconds_count\{operation="transaction_count"\} [1-9]/);
});

it('counts client-credentials fetches, and refreshes that fail by why they failed', async () => {
  // A counter is absent until its first increment.
  const metric = async (pattern: RegExp) => (await metricValue(pattern)) ?? 0;
  const fetched = /^bff_client_credentials_fetch_total\{outcome="success"\} (\d+)$/m;
  const refused = /^bff_token_refresh_total\{outcome="invalid_grant"\} (\d+)$/m;
  const [fetchedBefore, refusedBefore] = [await metric(fetched), await metric(refused)];

  const service = await new BrowserClient().get(`${gw.url}/service/report`, { headers: csrf });
  expect(service.status).toBe(200);
  expect(String(upstream.requests.at(-1)?.headers.authorization)).toMatch(/^Bearer /);
  expect(await metric(fetched)).toBe(fetchedBefore + 1);

  // The provider forgets the session's grant: the next refresh is refused.
  const client = new BrowserClient();
  await signIn(client, gw.url);
  const tokens = await tokensOfSession(gw, client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string);
  expect(await stack.provider.revoke(tokens?.refreshToken as string, undefined, 'refresh_token')).toBe(200);
  clock.advance(3600);
  const call = await client.get(`${gw.url}/api/echo`, { headers: csrf });
  expect(call.status).toBe(401);
  expect(await metric(refused)).toBe(refusedBefore + 1);
});

it("reports the estimated bytes of this process's session caches: one more session read adds its record and its token set", async () => {
  const cacheBytes = async () => ({
    views: await metricValue(/^bff_session_cache_bytes\{cache="views"\} (\d+)$/m),
    tokens: await metricValue(/^bff_session_cache_bytes\{cache="tokens"\} (\d+)$/m),
  });
  const before = await cacheBytes();
  const client = new BrowserClient();
  await signIn(client, gw.url);
  expect((await client.get(`${gw.url}/api/echo`, { headers: csrf })).status).toBe(200);
  const after = await cacheBytes();

  const cookie = client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
  const raw = await gw.runtime.redis.getBuffer(gw.runtime.keys.session(digest(sessionIdFromCookie(cookie))));
  const sealed = (await gw.runtime.records.peek(digest(sessionIdFromCookie(cookie))))?.tokens.sealed ?? '';
  expect(raw?.length).toBeGreaterThan(1000);
  expect(sealed.length).toBeGreaterThan(500);
  expect((after.views ?? 0) - (before.views ?? 0)).toBe(2 * (raw?.length ?? 0) + 1024);
  expect((after.tokens ?? 0) - (before.tokens ?? 0)).toBe(2 * sealed.length + 512);
});
