/**
 * OpenTelemetry traces (issue 17), through a real gateway exporting OTLP/HTTP to a test
 * receiver: sign-in, a proxied call carrying an untrusted browser traceparent and a query, a
 * proxied call that refreshes, a client-credentials route, logout. Then the span tree (names,
 * kinds, parents, attributes), the traceparent the upstream got, the trace_id of log lines, and
 * every exported byte searched for the session's secrets.
 *
 * The flow also holds a GET /auth/events stream (cookie, Last-Event-ID) and a WebSocket upgrade
 * with a secret in its query, whose spans are scanned like the rest (issue 16 review).
 *
 * Mutations that fail it:
 *   - in src/http/request-tracing.ts `upstream().start`, delete the line
 *     `tracing.inject(span, req.headers);` (the upstream then gets the browser's traceparent, or
 *     none: "the upstream got the upstream span's traceparent" fails);
 *   - in src/http/request-tracing.ts `upgrade`, add `'url.query': req.url ?? '',` to the span's
 *     attributes → the WebSocket's query secret is exported and the secret scan fails.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { completeAtProvider, startLogin } from '../../support/drive-login.js';
import { createTestClock } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { findSecrets } from '../../support/secrets.js';
import { startOtlpReceiver, SPAN_KIND, type OtlpReceiver, type ReceivedSpan } from '../../support/otlp-receiver.js';
import { eventually } from '../../support/wait.js';
import { openStream } from '../../support/live-streams.js';
import { rawUpgrade } from '../../support/raw-http.js';
import { listenOnLoopback } from '../../support/listen.js';
import http from 'node:http';
import type { TokenSet } from '../../../src/session/tokens.js';

const csrf = { 'x-csrf': '1' };
const CLIENT_SECRET = 'bff-test-secret-0123456789abcdef';
const QUERY_SECRET = 'q-secret-5b0e6f0c9a';
const BROWSER_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const BROWSER_TRACEPARENT = `00-${BROWSER_TRACE_ID}-00f067aa0ba902b7-01`;

const clock = createTestClock();
let receiver: OtlpReceiver;
let upstream: Upstream;
let stack: Stack;

interface Flow {
  code: string;
  state: string;
  nonce: string;
  loginCookie: string;
  sessionCookie: string;
  tokens: TokenSet[];
  clientToken: string;
  /** The traceparent and tracestate the upstream got, per call. */
  seen: Record<'untrusted' | 'refresh' | 'client', { traceparent?: string; tracestate?: string }>;
}
let flow: Flow;

const byName = (name: string) => receiver.spans.filter((s) => s.name === name);
const only = (name: string, where: (s: ReceivedSpan) => boolean = () => true): ReceivedSpan => {
  const found = byName(name).filter(where);
  if (found.length !== 1) throw new Error(`expected one span ${name}, got ${found.length}: ${receiver.spans.map((s) => s.name).join(', ')}`);
  return found[0] as ReceivedSpan;
};
const childrenOf = (parent: ReceivedSpan) => receiver.spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);
const headerOf = (value: string | string[] | undefined) => (Array.isArray(value) ? value.join(',') : value);

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startUpstream({ websocket: true });
  // A port nothing listens on any more: the /down route's upstream refuses connections.
  const gone = http.createServer();
  const gonePort = await listenOnLoopback(gone);
  await new Promise((resolve) => gone.close(resolve));
  stack = await startStack({
    clock,
    provider: { ttl: { AccessToken: 60 } },
    client: { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] },
    config: {
      clientSecret: CLIENT_SECRET,
      logLevel: 'debug',
      observability: { tracing: { endpoint: receiver.url } },
      routes: [
        { path: '/api', target: upstream.url, auth: 'user' },
        { path: '/svc', target: upstream.url, auth: 'client' },
        { path: '/down', target: `http://127.0.0.1:${gonePort}`, auth: 'none' },
        { path: '/ws', target: upstream.url, auth: 'user', websocket: true },
      ],
    },
  });
  const gw = stack.gateway;
  const browser = new BrowserClient();

  // 1. Sign in.
  const { gatewayResponse, authorizeUrl } = await startLogin(browser, gw.url, { returnTo: '/home' });
  const loginCookie = gatewayResponse.headers.getSetCookie().find((c) => c.startsWith(`${gw.config.derived.loginCookieName}.`));
  const callbackUrl = await completeAtProvider(browser, authorizeUrl);
  expect((await browser.get(callbackUrl)).status).toBe(302);
  const sessionCookie = browser.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
  const tokens = [(await tokensOfSession(gw, sessionCookie)) as TokenSet];
  expect((await browser.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);

  // 2. A proxied call with a browser traceparent (not trusted) and a query.
  const call = async (path: string, headers: Record<string, string> = {}) => {
    upstream.reset();
    const res = await browser.get(`${gw.url}${path}`, { headers: { ...csrf, ...headers } });
    expect(res.status).toBe(200);
    const got = upstream.requests[0]?.headers ?? {};
    return { traceparent: headerOf(got.traceparent), tracestate: headerOf(got.tracestate), authorization: headerOf(got.authorization) };
  };
  const untrusted = await call(`/api/echo?token=${QUERY_SECRET}`, { traceparent: BROWSER_TRACEPARENT, tracestate: 'browser=1' });

  // 3. A proxied call that refreshes (the 60 s access token is past its refresh window).
  clock.advance(120);
  const refresh = await call('/api/echo');
  tokens.push((await tokensOfSession(gw, sessionCookie)) as TokenSet);

  // 4. A client-credentials route; a refused call (no CSRF header) and a failed one; logout.
  const client = await call('/svc/echo');
  expect((await browser.get(`${gw.url}/api/echo`)).status).toBe(403);
  expect((await browser.get(`${gw.url}/down/echo`, { headers: csrf })).status).toBe(502);
  // 5. The session's event stream (opened, then left) and a WebSocket with a secret in its query.
  const cookieHeader = `${gw.config.derived.sessionCookieName}=${sessionCookie}`;
  const events = await openStream(`${gw.url}/auth/events`, { cookie: cookieHeader, 'sec-fetch-site': 'same-origin', 'last-event-id': '7' });
  expect(events.status).toBe(200);
  events.destroy();
  const ws = await rawUpgrade(gw.url, `/ws/socket?token=${QUERY_SECRET}`, { origin: gw.config.derived.publicOrigin, cookie: cookieHeader });
  expect(ws.status).toBe(101);
  expect((await browser.post(`${gw.url}/auth/logout`, { headers: csrf })).status).toBe(200);

  await gw.runtime.tracing.flush();
  await eventually('the logout, event-stream and WebSocket spans at the receiver', 10_000, async () => {
    await gw.runtime.tracing.flush();
    return byName('POST /auth/logout').length === 1 && byName('GET /auth/events').length === 1 && byName('proxy /ws').length === 1;
  });
  flow = {
    code: new URL(callbackUrl).searchParams.get('code') ?? '',
    state: authorizeUrl.searchParams.get('state') ?? '',
    nonce: authorizeUrl.searchParams.get('nonce') ?? '',
    loginCookie: loginCookie?.split(';')[0]?.split('=').slice(1).join('=') ?? '',
    sessionCookie,
    tokens,
    clientToken: (client.authorization ?? '').replace(/^Bearer /, ''),
    seen: { untrusted, refresh, client },
  };
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
  await receiver?.close();
});

describe('the exported spans', () => {
  it('arrive as OTLP/HTTP JSON, with the service name as resource', () => {
    expect(receiver.requests.every((r) => r.method === 'POST' && r.path === '/v1/traces' && r.contentType.startsWith('application/json'))).toBe(true);
    expect(receiver.spans.length).toBeGreaterThan(10);
    expect(new Set(receiver.spans.map((s) => s.resource['service.name']))).toEqual(new Set(['bff-gateway']));
  });

  it('name every gateway endpoint by its template, as a SERVER root span with method, status and outcome', () => {
    const login = only('GET /auth/login');
    expect(login).toMatchObject({ kind: SPAN_KIND.server, parentSpanId: '' });
    expect(login.attributes).toMatchObject({ 'http.request.method': 'GET', 'http.route': '/auth/login', 'http.response.status_code': 302, 'bff.outcome': 'ok' });
    const user = only('GET /auth/user');
    expect(user.attributes).toMatchObject({ 'http.response.status_code': 200 });
    expect(childrenOf(user).map((s) => s.name)).toContain('session.read');
  });

  it('put the code exchange under the callback: oidc.token (authorization_code), a CLIENT span with the status', () => {
    const callback = only('GET /auth/callback');
    const exchange = only('oidc.token', (s) => s.attributes['oauth.grant_type'] === 'authorization_code');
    expect(exchange).toMatchObject({ kind: SPAN_KIND.client, parentSpanId: callback.spanId, traceId: callback.traceId });
    expect(exchange.attributes['http.response.status_code']).toBe(200);
  });

  it('give a refreshing proxied call its tree: session.read, session.refresh (performed) → oidc.token (refresh_token), upstream', () => {
    const refresh = only('session.refresh');
    expect(refresh.attributes['bff.refresh.outcome']).toBe('performed');
    const proxy = receiver.spans.find((s) => s.spanId === refresh.parentSpanId) as ReceivedSpan;
    expect(proxy).toMatchObject({ name: 'proxy /api', kind: SPAN_KIND.server, parentSpanId: '' });
    expect(proxy.attributes).toMatchObject({ 'http.request.method': 'GET', 'http.route': '/api', 'http.response.status_code': 200, 'bff.outcome': 'ok' });
    expect(childrenOf(proxy).map((s) => s.name).sort()).toEqual(['session.read', 'session.refresh', 'upstream']);
    expect(childrenOf(refresh).map((s) => [s.name, s.attributes['oauth.grant_type']])).toEqual([['oidc.token', 'refresh_token']]);
    const call = childrenOf(proxy).find((s) => s.name === 'upstream') as ReceivedSpan;
    expect(call.kind).toBe(SPAN_KIND.client);
    expect(call.attributes).toMatchObject({ 'bff.route': '/api', 'http.request.method': 'GET', 'http.response.status_code': 200 });
  });

  it('give a client-credentials route client_credentials.fetch (fetched) → oidc.token (client_credentials)', () => {
    const proxy = only('proxy /svc');
    const fetch = only('client_credentials.fetch');
    expect(fetch.parentSpanId).toBe(proxy.spanId);
    expect(fetch.attributes['bff.client_credentials.outcome']).toBe('fetched');
    expect(childrenOf(fetch).map((s) => [s.name, s.attributes['oauth.grant_type']])).toEqual([['oidc.token', 'client_credentials']]);
  });

  it('give refused and failed calls their error code as outcome; only the 5xx is an ERROR, with no message', () => {
    const refused = only('proxy /api', (s) => s.attributes['http.response.status_code'] === 403);
    expect(refused.attributes['bff.outcome']).toBe('csrf_check_failed');
    expect(refused.statusCode).toBe(0);
    const failed = only('proxy /down');
    expect(failed.attributes).toMatchObject({ 'http.response.status_code': 502, 'bff.outcome': 'bad_gateway', 'error.type': '502' });
    expect([failed.statusCode, failed.statusMessage]).toEqual([2, '']);
    const call = childrenOf(failed).find((s) => s.name === 'upstream') as ReceivedSpan;
    expect([call.attributes['error.type'], call.statusCode]).toEqual(['bad_gateway', 2]);
  });

  it('put the revocations under the logout', () => {
    const logout = only('POST /auth/logout');
    expect(childrenOf(logout).filter((s) => s.name === 'oidc.revoke').length).toBeGreaterThanOrEqual(1);
  });
});

describe('propagation', () => {
  it('sends the upstream the upstream span’s traceparent, in the proxy span’s trace', () => {
    for (const [route, seen] of [['/api', flow.seen.refresh], ['/svc', flow.seen.client]] as const) {
      const proxy = receiver.spans.find((s) => s.name === `proxy ${route}` && seen.traceparent?.includes(s.traceId)) as ReceivedSpan;
      expect(proxy).toBeDefined();
      const call = childrenOf(proxy).find((s) => s.name === 'upstream') as ReceivedSpan;
      expect(seen.traceparent).toBe(`00-${proxy.traceId}-${call.spanId}-01`);
    }
  });

  it('ignores an untrusted browser traceparent and never forwards it or its tracestate', () => {
    expect(flow.seen.untrusted.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(flow.seen.untrusted.traceparent).not.toContain(BROWSER_TRACE_ID);
    expect(flow.seen.untrusted.tracestate).toBeUndefined();
    expect(receiver.spans.filter((s) => s.traceId === BROWSER_TRACE_ID)).toEqual([]);
    expect(byName('proxy /api').every((s) => s.parentSpanId === '')).toBe(true);
  });
});

describe('log lines', () => {
  it('carry the trace_id and span_id of the span they were written in', () => {
    const refresh = only('session.refresh');
    const line = stack.gateway.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.event === 'token_refresh');
    expect(line).toMatchObject({ trace_id: refresh.traceId, span_id: refresh.spanId });
  });
});

describe('secrets', () => {
  it('never appear in any exported byte: names, attributes, events, status, resource', () => {
    const secrets: Record<string, string | undefined> = {
      'authorization code': flow.code,
      state: flow.state,
      nonce: flow.nonce,
      'client secret': CLIENT_SECRET,
      'client-credentials token': flow.clientToken,
      'login cookie value': flow.loginCookie,
      'session cookie value': flow.sessionCookie,
      'session cookie value (decoded)': decodeURIComponent(flow.sessionCookie),
      'session ID': sessionIdFromCookie(flow.sessionCookie),
      'the URL query': QUERY_SECRET,
      'session.secrets[0]': stack.config.session.secrets[0],
    };
    flow.tokens.forEach((t, i) => {
      secrets[`access token ${i}`] = t.accessToken;
      secrets[`refresh token ${i}`] = t.refreshToken;
      secrets[`ID token ${i}`] = t.idToken;
    });
    // Each secret was really part of the flow (a scan for empty strings proves nothing).
    for (const [name, value] of Object.entries(secrets)) expect([name, (value ?? '').length > 8]).toEqual([name, true]);
    const exported = receiver.bodies.join('\n');
    expect(exported.length).toBeGreaterThan(1000);
    expect(findSecrets(exported, secrets)).toEqual([]);
    expect(receiver.spans.every((s) => s.statusMessage === '' && s.events.length === 0)).toBe(true);
  });
});
