/**
 * SPEC §5: "Tokens, cookies, codes and secrets never appear in logs, error bodies or metrics",
 * and Redis never holds a token in plaintext. A whole flow at log level debug (sign-in,
 * /auth/user, a proxied call, a silent refresh, an upstream 401 that forces a refresh and a
 * retry, logout), then every log line, every Redis value under the gateway's prefix (taken at
 * several moments), /metrics, and every response (body and headers) the browser got from the
 * gateway is searched for every secret of the flow.
 *
 * Findings are collected (name and place, never the value) so that one run reports them all.
 */
import { BrowserClient, type BrowserRequestInit, type BrowserResponse } from '../../support/browser-client.js';
import { completeAtProvider, startLogin } from '../../support/drive-login.js';
import { createTestClock, type TestGateway } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { redisUrlForTests } from '../../support/redis-server.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { dumpRedis } from '../../support/redis-dump.js';
import { findSecrets } from '../../support/secrets.js';
import type { TokenSet } from '../../../src/session/tokens.js';

const csrf = { 'x-csrf': '1' };
const CLIENT_SECRET = 'bff-test-secret-0123456789abcdef';

/** A browser that keeps every response it received. */
class RecordingBrowser extends BrowserClient {
  readonly responses: BrowserResponse[] = [];
  override async request(method: string, url: string | URL, init: BrowserRequestInit = {}): Promise<BrowserResponse> {
    const res = await super.request(method, url, init);
    this.responses.push(res);
    return res;
  }
}

const clock = createTestClock();
let upstream: Upstream;
let gw: TestGateway;
let redisUrl: string;
let stack: Stack;

beforeAll(async () => {
  upstream = await startUpstream();
  redisUrl = redisUrlForTests();
  stack = await startStack({
    clock,
    provider: { ttl: { AccessToken: 60 } },
    config: { redisUrl, clientSecret: CLIENT_SECRET, logLevel: 'debug', routes: [{ path: '/api', target: upstream.url, auth: 'user' }] },
  });
  gw = stack.gateway;
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

interface Captured {
  code: string;
  loginCookie: string;
  sessionCookie: string;
  tokenSets: TokenSet[];
  redisDumps: Array<{ when: string; values: string[] }>;
  browser: RecordingBrowser;
  metrics: string;
}

/** The whole flow; returns everything needed for the searches. */
async function runFlow(): Promise<Captured> {
  const browser = new RecordingBrowser();
  const prefix = `${gw.config.redis.keyPrefix}*`;
  const redisDumps: Captured['redisDumps'] = [];
  const tokenSets: TokenSet[] = [];
  const { gatewayResponse, authorizeUrl } = await startLogin(browser, gw.url, { returnTo: '/home' });
  const loginCookieHeader = gatewayResponse.headers.getSetCookie().find((c) => c.startsWith(`${gw.config.derived.loginCookieName}.`));
  const loginCookie = loginCookieHeader?.split(';')[0]?.split('=').slice(1).join('=') ?? '';
  expect(loginCookie.length).toBeGreaterThan(20);

  const callbackUrl = await completeAtProvider(browser, authorizeUrl);
  const code = new URL(callbackUrl).searchParams.get('code') ?? '';
  expect(code.length).toBeGreaterThan(10);
  redisDumps.push({ when: 'during the login (transaction stored)', values: await dumpRedis(redisUrl, prefix) });

  const callback = await browser.get(callbackUrl);
  expect(callback.status).toBe(302);
  const sessionCookie = browser.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
  expect(sessionCookie).toBeDefined();
  tokenSets.push((await tokensOfSession(gw, sessionCookie)) as TokenSet);
  redisDumps.push({ when: 'after sign-in', values: await dumpRedis(redisUrl, prefix) });

  expect((await browser.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
  // the session list names sessions by an opaque handle, never by the cookie or session ID
  expect((await browser.get(`${gw.url}/auth/sessions`, { headers: csrf })).status).toBe(200);
  expect((await browser.get(`${gw.url}/api/status/200`, { headers: csrf })).status).toBe(200);

  // Silent refresh: the access token (60 s) is past its refresh window.
  clock.advance(120);
  expect((await browser.get(`${gw.url}/api/status/200`, { headers: csrf })).status).toBe(200);
  tokenSets.push((await tokensOfSession(gw, sessionCookie)) as TokenSet);
  redisDumps.push({ when: 'after the silent refresh', values: await dumpRedis(redisUrl, prefix) });

  // An upstream that says invalid_token: refresh once, retry once, then the 401 passes through.
  const unauthorized = await browser.get(`${gw.url}/api/status/401`, { headers: csrf });
  expect(unauthorized.status).toBe(401);
  // Error paths of the gateway itself, for good measure.
  expect((await browser.get(`${gw.url}/api/status/200`)).status).toBe(403);
  expect((await browser.get(`${gw.url}/auth/callback?state=unknown&code=${encodeURIComponent(code)}`)).status).toBe(400);
  tokenSets.push((await tokensOfSession(gw, sessionCookie)) as TokenSet);
  redisDumps.push({ when: 'before logout', values: await dumpRedis(redisUrl, prefix) });

  const logout = await browser.post(`${gw.url}/auth/logout`, { headers: csrf });
  expect(logout.status).toBe(200);
  redisDumps.push({ when: 'after logout', values: await dumpRedis(redisUrl, prefix) });
  const metrics = (await new BrowserClient().get(`${gw.url}/metrics`)).text;
  return { code, loginCookie, sessionCookie, tokenSets, redisDumps, browser, metrics };
}

let captured: Captured;
let tokenSecrets: Record<string, string | undefined>;
let otherSecrets: Record<string, string | undefined>;
let cookieSecrets: Record<string, string | undefined>;
const findings: string[] = [];

function search(haystack: string, secrets: Record<string, string | undefined>, where: string): void {
  findings.push(...findSecrets(haystack, secrets).map((name) => `${name} in ${where}`));
}

beforeAll(async () => {
  captured = await runFlow();
  tokenSecrets = {};
  captured.tokenSets.forEach((t, i) => {
    const label = ['at sign-in', 'after refresh', 'after the 401 retry'][i];
    tokenSecrets[`access token (${label})`] = t.accessToken;
    tokenSecrets[`refresh token (${label})`] = t.refreshToken;
    tokenSecrets[`ID token (${label})`] = t.idToken;
  });
  const config = gw.config;
  otherSecrets = {
    'authorization code': captured.code,
    'client secret': CLIENT_SECRET,
    'session.secrets[0]': config.session.secrets[0],
    'session.encryptionKeys[0]': config.session.encryptionKeys[0],
  };
  cookieSecrets = {
    'session cookie value': captured.sessionCookie,
    'session cookie value (decoded)': decodeURIComponent(captured.sessionCookie),
    'session ID': sessionIdFromCookie(captured.sessionCookie),
    'login cookie value': captured.loginCookie,
  };
}, 30_000);

afterAll(() => {
  if (findings.length > 0) console.log(`secrets found:\n  ${[...new Set(findings)].join('\n  ')}`);
});

it('went through sign-in, /auth/user, /auth/sessions, proxied calls, two refreshes and logout', () => {
  const distinctAccess = new Set(captured.tokenSets.map((t) => t.accessToken));
  expect(distinctAccess.size).toBe(3);
  for (const t of captured.tokenSets) {
    expect(t.refreshToken).toEqual(expect.any(String));
    expect(t.idToken).toEqual(expect.any(String));
  }
  console.log(
    `searched: ${gw.logs.length} log lines, ${captured.redisDumps.reduce((n, d) => n + d.values.length, 0)} Redis values in ${captured.redisDumps.length} dumps, ` +
      `${captured.browser.responses.filter((r) => r.url.startsWith(gw.url)).length} gateway responses, /metrics (${captured.metrics.length} bytes); ` +
      `${Object.keys({ ...tokenSecrets, ...otherSecrets, ...cookieSecrets }).length} secrets`,
  );
});

it('logs no token, code, cookie or secret (level debug)', () => {
  const before = findings.length;
  gw.logs.forEach((line, i) => search(line, { ...tokenSecrets, ...otherSecrets, ...cookieSecrets }, `log line ${i + 1}`));
  expect(findings.slice(before)).toEqual([]);
});

it('keeps no token, code, cookie or secret in Redis, at any moment of the flow', () => {
  const before = findings.length;
  for (const dump of captured.redisDumps) {
    dump.values.forEach((value, i) => search(value, { ...tokenSecrets, ...otherSecrets, ...cookieSecrets }, `Redis value ${i + 1} ${dump.when}`));
  }
  expect(findings.slice(before)).toEqual([]);
});

it('exposes nothing in /metrics', () => {
  const before = findings.length;
  search(captured.metrics, { ...tokenSecrets, ...otherSecrets, ...cookieSecrets }, '/metrics');
  expect(findings.slice(before)).toEqual([]);
});

it('sends the browser no token, code or secret in any body or header, and cookie values only in Set-Cookie', () => {
  const before = findings.length;
  const gatewayResponses = captured.browser.responses.filter((r) => r.url.startsWith(gw.url));
  expect(gatewayResponses.length).toBeGreaterThanOrEqual(9);
  for (const res of gatewayResponses) {
    const where = `the response to ${new URL(res.url).pathname} (${res.status})`;
    let body = res.text;
    if (new URL(res.url).pathname === '/auth/logout') {
      // SPEC §3: the end-session URL carries id_token_hint (the latest ID token) by design.
      const logoutUrl = new URL(res.json<{ logoutUrl: string }>().logoutUrl, gw.url);
      const hint = logoutUrl.searchParams.get('id_token_hint');
      expect(hint).toBe(captured.tokenSets[captured.tokenSets.length - 1]?.idToken);
      logoutUrl.searchParams.delete('id_token_hint');
      body = JSON.stringify({ logoutUrl: logoutUrl.href });
    }
    search(body, { ...tokenSecrets, ...otherSecrets, ...cookieSecrets }, `${where} body`);
    for (const [name, value] of res.headers.entries()) {
      if (name === 'set-cookie') continue;
      search(value, { ...tokenSecrets, ...otherSecrets, ...cookieSecrets }, `${where} header ${name}`);
    }
    for (const setCookie of res.headers.getSetCookie()) search(setCookie, { ...tokenSecrets, ...otherSecrets }, `${where} Set-Cookie`);
  }
  expect(findings.slice(before)).toEqual([]);
});

it('sends the upstream the access token only, never the refresh or ID token, the session cookie or a secret', () => {
  const before = findings.length;
  const { 'access token (at sign-in)': _a, 'access token (after refresh)': _b, 'access token (after the 401 retry)': _c, ...notForUpstream } = tokenSecrets;
  upstream.requests.forEach((req, i) => search(JSON.stringify(req.headers), { ...notForUpstream, ...otherSecrets, ...cookieSecrets }, `upstream request ${i + 1} headers`));
  expect(upstream.requests.length).toBeGreaterThanOrEqual(4);
  expect(findings.slice(before)).toEqual([]);
});

it('is not blind: the same search finds each secret where it legitimately is', () => {
  const found = (haystack: string, secrets: Record<string, string | undefined>) =>
    Object.entries(secrets).filter(([, v]) => v && haystack.includes(v)).map(([k]) => k);
  const setCookies = captured.browser.responses.flatMap((r) => r.headers.getSetCookie()).join('\n');
  expect(found(setCookies, { a: cookieSecrets['session cookie value'], b: cookieSecrets['login cookie value'] })).toEqual(['a', 'b']);
  expect(found(JSON.stringify(captured.tokenSets), tokenSecrets)).toHaveLength(Object.values(tokenSecrets).filter(Boolean).length);
  const providerRedirects = captured.browser.responses.map((r) => r.headers.get('location') ?? '').join('\n');
  expect(found(providerRedirects, { code: otherSecrets['authorization code'] })).toEqual(['code']);
});
