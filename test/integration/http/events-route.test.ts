/**
 * GET /auth/events at the boundary (SPEC §3, issue 16): who may open it (the session cookie,
 * `Origin` and `Sec-Fetch-Site` as for a WebSocket upgrade), what bad input gets (a 4xx in the
 * error shape), what the stream carries (retry:, ids counting on from Last-Event-ID, heartbeats,
 * step-up-required as published on the bus, never a token), and its metric. Real provider,
 * real Redis, one in-process gateway; the multi-instance behaviour is in
 * process/live-sessions.test.ts.
 *
 * Mutation checks (done by hand once):
 *   - src/http/events-route.ts, checkRequest: drop the
 *     `origin !== config.derived.publicOrigin` condition's throw → "refuses a foreign Origin" fails
 *     (the stream opens with 200).
 *   - src/app.ts, the stepUpRequired hook: `if (sessionDigest === undefined) return;` → `!==` →
 *     the upstream's challenge never reaches the stream: the step-up test fails.
 *   - src/http/auth-routes.ts, callback: `registry.end(old, 'replaced')` → `registry.end(old)`
 *     → the re-sign-in test gets `{ reason: 'logout' }`.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { openStream, type HeldStream } from '../../support/live-streams.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody, expectNoSecretIn, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';
import { digest } from '../../../src/redis/keys.js';

let stack: Stack;
let upstream: Upstream;
let client: BrowserClient;
let cookieValue: string;
let cookie: string;
const opened: HeldStream[] = [];

beforeAll(async () => {
  upstream = await startUpstream();
  // An upstream that asks for a stronger sign-in (RFC 9470) on every call.
  upstream.setHandler((_req, res) => {
    res.writeHead(401, { 'www-authenticate': 'Bearer error="insufficient_user_authentication", acr_values="urn:example:mfa", max_age=300' });
    res.end();
  });
  stack = await startStack({
    app: { eventStream: { heartbeatMs: 200 } },
    config: { routes: [{ path: '/api', target: upstream.url, auth: 'user' }] },
  });
  client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  cookieValue = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
  cookie = `${stack.config.derived.sessionCookieName}=${cookieValue}`;
});

afterAll(async () => {
  for (const s of opened) s.destroy();
  await stack?.close();
  await upstream?.close();
});

const url = () => `${stack.gateway.url}/auth/events`;
async function open(headers: Record<string, string> = {}): Promise<HeldStream> {
  const s = await openStream(url(), { cookie, 'sec-fetch-site': 'same-origin', ...headers });
  opened.push(s);
  return s;
}
const sessionDigest = () => digest(sessionIdFromCookie(cookieValue));

async function openGauge(): Promise<number> {
  const text = await stack.gateway.runtime.metrics.registry.getSingleMetricAsString('bff_event_streams_open');
  return Number(/bff_event_streams_open (\d+)/.exec(text)?.[1]);
}

describe('GET /auth/events', () => {
  it('answers 401 login_required without a session', async () => {
    expectErrorBody(await new BrowserClient().get(url()), 'login_required', 401);
  });

  it.each([
    ['a foreign Origin', { origin: 'https://evil.example' }],
    ['a null Origin', { origin: 'null' }],
    ['Sec-Fetch-Site cross-site', { 'sec-fetch-site': 'cross-site' }],
    ['Sec-Fetch-Site same-site', { 'sec-fetch-site': 'same-site' }],
    ['Sec-Fetch-Site none (an address-bar visit)', { 'sec-fetch-site': 'none' }],
    ['Sec-Fetch-Site cross-site with our own Origin', { 'sec-fetch-site': 'cross-site', origin: 'PUBLIC_ORIGIN' }],
    ['an Origin with a trailing slash', { origin: 'PUBLIC_ORIGIN/' }],
  ])('refuses %s with 403 csrf_check_failed', async (_what, given) => {
    // The public origin is known once the stack runs.
    const headers = Object.fromEntries(Object.entries(given).map(([k, v]) => [k, v.replace('PUBLIC_ORIGIN', stack.config.derived.publicOrigin)]));
    expectErrorBody(await client.get(url(), { headers }), 'csrf_check_failed', 403);
  });

  it.each(['abc', '-1', '1.5', '9'.repeat(16)])('answers 400 invalid_request for Last-Event-ID %p', async (id) => {
    expectErrorBody(await client.get(url(), { headers: { 'last-event-id': id, origin: stack.config.derived.publicOrigin } }), 'invalid_request', 400);
  });

  it('streams retry:, heartbeats and a step-up-required published on the bus, with ids counting on from Last-Event-ID, and no token', async () => {
    const stream = await open({ origin: stack.config.derived.publicOrigin, 'last-event-id': '41' });
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(stream.headers['cache-control']).toContain('no-store');
    await eventually('a heartbeat', 10_000, () => stream.text().includes(': heartbeat'));
    expect(stream.text()).toMatch(/^retry: \d+\n\n/);

    stack.gateway.runtime.events.publish(sessionDigest(), {
      type: 'step-up-required',
      acr_values: 'urn:example:mfa',
      max_age: 300,
      loginUrl: '/auth/login?acr_values=urn%3Aexample%3Amfa&max_age=300',
    });
    const event = await stream.waitForEvent('step-up-required', 10_000);
    expect(event.id).toBe('42');
    expect(JSON.parse(event.data)).toEqual({
      acr_values: 'urn:example:mfa',
      max_age: 300,
      loginUrl: '/auth/login?acr_values=urn%3Aexample%3Amfa&max_age=300',
    });
    const tokens = await tokensOfSession(stack.gateway, cookieValue);
    expectNoSecretIn(
      stream.text(),
      {
        accessToken: tokens?.accessToken,
        refreshToken: tokens?.refreshToken,
        idToken: tokens?.idToken,
        cookie: cookieValue,
        sessionId: sessionIdFromCookie(cookieValue),
        digest: sessionDigest(),
      },
      'the event stream',
    );
    stream.destroy();
  });

  it("tells the stream of an upstream's step-up challenge, as the 401 step_up_required tells the caller", async () => {
    const stream = await open();
    const res = await client.get(`${stack.gateway.url}/api/orders`, { headers: { 'x-csrf': '1' } });
    expect(res.status).toBe(401);
    const answered = JSON.parse(res.text) as { error: string; loginUrl: string };
    expect(answered.error).toBe('step_up_required');
    const event = JSON.parse((await stream.waitForEvent('step-up-required', 10_000)).data) as Record<string, unknown>;
    expect(event).toEqual({ acr_values: 'urn:example:mfa', max_age: 300, loginUrl: answered.loginUrl });
    stream.destroy();
  });

  it('ends the stream with signed-out replaced when this browser signs in again (not logout), and the new cookie opens a stream', async () => {
    const stream = await open();
    const previousDigest = sessionDigest();
    await signIn(client, stack.gateway.url);
    expect(JSON.parse((await stream.waitForEvent('signed-out', 10_000)).data)).toEqual({ reason: 'replaced' });
    expect((await stream.closed).complete).toBe(true);
    expectErrorBody(await new BrowserClient().get(url(), { headers: { cookie } }), 'login_required', 401);

    cookieValue = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
    cookie = `${stack.config.derived.sessionCookieName}=${cookieValue}`;
    expect(sessionDigest()).not.toBe(previousDigest);
    const renewed = await open();
    expect(renewed.status).toBe(200);
    renewed.destroy();
  });

  // Found by a red team in Chromium: six tabs with a stream each took all six connections a
  // browser opens to one host over HTTP/1.1, and every call of every tab hung. Fails if
  // src/http/events-route.ts's default `maxPerSession` is back at 8.
  it('holds at most 4 streams per session by default, so that a browser keeps connections for its calls', async () => {
    await eventually('no stream left open', 10_000, async () => (await openGauge()) === 0);
    const held = [await open(), await open(), await open(), await open()];
    expect(held.map((s) => s.status)).toEqual([200, 200, 200, 200]);
    const fifth = await open();
    expect(fifth.status).toBe(429);
    expect(fifth.headers['retry-after']).toBeDefined();
    for (const s of [...held, fifth]) s.destroy();
  });

  it('counts open streams, back to 0 when they close, and ends them with signed-out on logout', async () => {
    // The earlier tests' streams were cut by the client: the gateway may still be seeing them go.
    await eventually('no stream left open', 10_000, async () => (await openGauge()) === 0);
    const stream = await open();
    await eventually('the gauge to count it', 10_000, async () => (await openGauge()) === 1);
    const res = await client.post(`${stack.gateway.url}/auth/logout`, { headers: { 'x-csrf': '1' } });
    expect(res.status).toBe(200);
    expect(JSON.parse((await stream.waitForEvent('signed-out', 10_000)).data)).toEqual({ reason: 'logout' });
    expect((await stream.closed).complete).toBe(true);
    await eventually('the gauge to drop', 10_000, async () => (await openGauge()) === 0);
    // The cookie now names no session.
    expectErrorBody(await client.get(url()), 'login_required', 401);
  });
});
