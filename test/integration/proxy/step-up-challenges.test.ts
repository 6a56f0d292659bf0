/**
 * Step-up (RFC 9470) challenges from routes and upstreams, and how they reach the browser (401
 * body) and the session's live event stream (found by the step-up red team). Real provider,
 * Redis, upstreams and a WebSocket upstream that asks for step-up on the handshake.
 *
 * Mutation checks (by hand, once):
 * - src/session/events.ts isLocalPath: `value.length <= 16384` → `<= 2048` (as it was): "a long
 *   (but valid) path" fails (the event is dropped as malformed, the 401 alone tells).
 * - src/http/step-up.ts spend: `if (spent.count >= TELLS_PER_WINDOW) return false;` removed: "varying
 *   acr_values" fails (30 events for 30 calls).
 * - src/proxy/websocket-tunnel.ts openTunnel: `if (stepUp instanceof GatewayError)` → `... && false`:
 *   the handshake test fails (502).
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { BrowserClient } from '../../support/browser-client.js';
import { rawUpgrade } from '../../support/raw-http.js';
import { signIn } from '../../support/drive-login.js';
import { openStream, type HeldStream } from '../../support/live-streams.js';
import { startStack, type Stack } from '../../support/stack.js';
import { createTestClock } from '../../support/gateway.js';
import { eventually } from '../../support/wait.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const MFA = 'urn:bff:acr:mfa';
const csrf = { 'x-csrf': '1' };
let challenge = (_n: number) => `Bearer error="insufficient_user_authentication", acr_values="${MFA}"`;
let calls = 0;
let upstream: Upstream;
let wsChallenger: http.Server;
let stack: Stack;
const opened: HeldStream[] = [];

function resourceServer(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  if (req.url?.includes('/rs/')) {
    calls += 1;
    res.writeHead(401, { 'www-authenticate': challenge(calls), 'content-type': 'text/plain' });
    res.end('step up');
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end('{"ok":true}');
}

beforeAll(async () => {
  upstream = await startUpstream();
  upstream.setHandler(resourceServer);
  // An upstream WebSocket endpoint that asks for step-up on the handshake (RFC 9470 §3 applies to any request).
  wsChallenger = http.createServer((_req, res) => res.writeHead(404).end());
  wsChallenger.on('upgrade', (_req: IncomingMessage, socket: Socket) => {
    socket.end(
      `HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer error="insufficient_user_authentication", acr_values="${MFA}"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
    );
  });
  await new Promise<void>((r) => wsChallenger.listen(0, '127.0.0.1', r));
  const wsUrl = `http://127.0.0.1:${(wsChallenger.address() as AddressInfo).port}`;
  stack = await startStack({
    // A clock of its own: the 30 calls below stay within one event window however slow the machine.
    clock: createTestClock(),
    app: { eventStream: { heartbeatMs: 200 } },
    config: {
      routes: [
        { path: '/api/strong', target: upstream.url, auth: 'user', stepUp: { acr: [MFA] } },
        { path: '/api', target: upstream.url, auth: 'user' },
        { path: '/live', target: wsUrl, auth: 'user', websocket: true },
      ],
    },
  });
});

afterAll(async () => {
  for (const s of opened) s.destroy();
  await stack?.close();
  await upstream?.close();
  await new Promise<void>((r) => (wsChallenger ? wsChallenger.close(() => r()) : r()));
});

const gwUrl = () => stack.gateway.url;
const cookieName = () => stack.config.derived.sessionCookieName;

async function signedIn(): Promise<{ client: BrowserClient; cookie: string }> {
  const client = new BrowserClient();
  await signIn(client, gwUrl());
  const value = client.cookies(gwUrl())[cookieName()] as string;
  return { client, cookie: `${cookieName()}=${value}` };
}

async function events(cookie: string): Promise<HeldStream> {
  const s = await openStream(`${gwUrl()}/auth/events`, { cookie, origin: stack.config.derived.publicOrigin, 'sec-fetch-site': 'same-origin' });
  opened.push(s);
  expect(s.status).toBe(200);
  return s;
}

const published = async () =>
  (await stack.gateway.runtime.metrics.sessionEventsPublished.get()).values.find((v) => v.labels.kind === 'step-up-required')?.value ?? 0;

describe('step-up-required on /auth/events', () => {
  it('is delivered for a route step-up asked from a page with a long (but valid) path', async () => {
    const { client, cookie } = await signedIn();
    const stream = await events(cookie);
    // A same-origin page path that passes the returnTo rules (<= 2048 characters).
    const page = `/reports/${'q'.repeat(1990)}`;
    const res = await client.get(`${gwUrl()}/api/strong/x`, { headers: { ...csrf, referer: `${gwUrl()}${page}` } });
    expect(res.status).toBe(401);
    const body = JSON.parse(res.text) as { loginUrl: string };
    expect(new URL(body.loginUrl, gwUrl()).searchParams.get('returnTo')).toBe(page);
    // SPEC §3: the session's event stream carries step-up-required { acr_values, max_age, loginUrl }.
    const event = await stream.waitForEvent('step-up-required', 10_000);
    expect(JSON.parse(event.data)).toMatchObject({ acr_values: MFA });
  });

  it('an upstream varying acr_values cannot turn every call into an event for every tab: three per window', async () => {
    const { client } = await signedIn();
    const before = calls;
    const told = await published();
    challenge = (n) => `Bearer error="insufficient_user_authentication", acr_values="urn:x:acr:${n}"`;
    try {
      for (let i = 0; i < 30; i++) {
        const res = await client.get(`${gwUrl()}/api/rs/pay`, { headers: csrf });
        expect(res.status).toBe(401);
      }
    } finally {
      challenge = () => `Bearer error="insufficient_user_authentication", acr_values="${MFA}"`;
    }
    expect(calls - before).toBe(30);
    // Each publish is counted as it is made, before the answer that made it.
    expect((await published()) - told).toBe(3);
  });

  // Fails if, in src/http/step-up.ts tell, a route's own ask spends the budget too
  // (`if (upstreamChosen && !spend(…))` → `if (!spend(…))`): three asks of an upstream
  // silenced the route's configured step-up for the window (found by the second review).
  it("a route's own stepUp is still told after an upstream spent the window", async () => {
    const { client, cookie } = await signedIn();
    const stream = await events(cookie);
    challenge = (n) => `Bearer error="insufficient_user_authentication", acr_values="urn:x:acr:${n}"`;
    try {
      for (let i = 0; i < 3; i++) expect((await client.get(`${gwUrl()}/api/rs/pay`, { headers: csrf })).status).toBe(401);
    } finally {
      challenge = () => `Bearer error="insufficient_user_authentication", acr_values="${MFA}"`;
    }
    expect((await client.get(`${gwUrl()}/api/strong/x`, { headers: csrf })).status).toBe(401);
    const asked = () => stream.events().filter((e) => e.event === 'step-up-required').map((e) => (JSON.parse(e.data) as { acr_values: string }).acr_values);
    await eventually("the route's own ask on the stream", 10_000, () => asked().includes(MFA) || undefined);
    expect(asked()).toHaveLength(4);
  });
});

describe('step-up on WebSocket upgrades', () => {
  it("maps an upstream's insufficient_user_authentication answer to the handshake to 401 step_up_required", async () => {
    const { cookie } = await signedIn();
    const res = await rawUpgrade(gwUrl(), '/live/feed', { origin: stack.config.derived.publicOrigin, cookie });
    // SPEC §4: an upstream 401 with insufficient_user_authentication answers 401 step_up_required.
    expect(res.status).toBe(401);
    expect(JSON.parse(res.text)).toMatchObject({ error: 'step_up_required', acr_values: MFA });
  });

  // Fails if, in src/http/proxy-routes.ts, the upgrade's readSession no longer notes the session
  // on the request (its `own(req, session);` dropped): a browser's WebSocket
  // cannot read the 401, and the event was never published (found by the second review).
  it("tells the session's event stream of it: a browser's WebSocket cannot read the 401", async () => {
    const { cookie } = await signedIn();
    const stream = await events(cookie);
    expect((await rawUpgrade(gwUrl(), '/live/feed', { origin: stack.config.derived.publicOrigin, cookie })).status).toBe(401);
    expect(JSON.parse((await stream.waitForEvent('step-up-required', 10_000)).data)).toMatchObject({ acr_values: MFA });
  });
});
