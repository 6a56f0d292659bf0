/**
 * Live sessions across instances (issue 16, SPEC §3 GET /auth/events, §4): two real gateway
 * processes (the CLI, twice) on one Redis of their own. On process A a browser holds a proxied
 * WebSocket, a proxied event stream and GET /auth/events; the session ends through process B
 * (logout, DELETE /auth/sessions/{id}), through a back-channel logout, or by its absolute
 * timeout; A closes all three at once and /auth/events says why. Then Redis restarts (with an
 * append-only file, so the sessions survive, as in production): nothing is closed, the bus comes
 * back, and a session that ended while Redis was away is caught when it returns.
 *
 * Timing is reported, not asserted (the machine is shared): the closes are awaited with
 * generous bounds, and there is no polling left that could close anything by itself.
 *
 * Mutation checks (each done by hand once):
 *   - src/runtime.ts, registry onEnded: drop `events.publish(d, { type: 'signed-out', reason });`
 *     → nothing on A hears of a logout on B: the logout test times out waiting for the closes.
 *   - src/session/held.ts, recheck(): `alive[i] === false` → `alive[i] === true`: the session
 *     that expired while Redis was down stays open, and the live one is closed: the Redis test fails.
 *   - src/main.ts, shutdown(): drop `app.drain();` → the event stream is cut at the drain's
 *     deadline instead of ended: the SIGTERM test fails on `complete`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { BrowserClient } from '../../support/browser-client.js';
import { cliOidc, ensureBuilt, reserveCliPair, startCliGateway, startCliPair, stopCli, writeConfigFile, type Spawned } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { signIn } from '../../support/drive-login.js';
import { gatewayClient } from '../../support/gateway.js';
import { openStream, openWebSocket, type Closed, type HeldStream, type HeldWebSocket } from '../../support/live-streams.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { findFreePort, startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { holdOpen, startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually, withTimeout } from '../../support/wait.js';

/** Both timeouts: long enough for every step of a test, short enough to wait for once. */
const SESSION_SECONDS = 30;
/** The bound on a close that should take well under a second (a loaded machine is slow, not wrong). */
const CLOSE_BOUND_MS = 10_000;
const PREFIX = 'live:';

let tmp: string;
let redis: RedisServer;
let provider: TestProvider;
let upstream: Upstream;
let publicUrl: string;
let portA: number;
let portB: number;
let processes: Spawned[] = [];
/** Both processes' config but the port (and any server keys given). */
let configFor: (port: number, server?: Record<string, unknown>) => unknown;
const upstreamStreams = new Set<ServerResponse>();

beforeAll(async () => {
  ensureBuilt();
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-live-'));
  // Persisted on every write, so that a restart keeps the sessions (what a production Redis does).
  redis = await startRedisServer({ extraArgs: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  upstream = await startUpstream({ websocket: true });
  // An event stream that never ends by itself: only a cut (or the test) closes it.
  upstream.setHandler((_req, res) => {
    holdOpen(res, upstreamStreams, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }, 'data: first\n\n');
  });
  ({ portA, portB, publicUrl } = await reserveCliPair());
  provider = await startTestProvider({ clients: [gatewayClient(publicUrl)] });
  ({ processes, configFor } = await startCliPair(tmp, { portA, portB, publicUrl }, {
    oidc: cliOidc(provider.issuer),
    session: {
      secrets: [randomSecret()],
      encryptionKeys: [randomKey()],
      idleTimeoutSeconds: SESSION_SECONDS,
      absoluteTimeoutSeconds: SESSION_SECONDS,
    },
    redis: { url: redis.url, keyPrefix: PREFIX },
    routes: [{ path: '/live', target: upstream.url, auth: 'user', websocket: true }],
    log: { level: 'info' },
  }));
}, 200_000);

afterAll(async () => {
  if (process.env.LIVE_DEBUG) for (const p of processes) console.log(p.output());
  await stopCli(processes);
  for (const res of upstreamStreams) res.destroy();
  await upstream?.close();
  await provider?.close();
  await redis?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

interface Browser {
  client: BrowserClient;
  /** The Cookie header for either process (same publicUrl, as behind a load balancer). */
  cookie: string;
}

async function signInAs(user: string): Promise<Browser> {
  const client = new BrowserClient();
  await signIn(client, publicUrl, { user, password: `${user}-password` });
  const cookie = Object.entries(client.cookies(publicUrl))
    .map(([name, value]) => `${name}=${value}`)
    .join('; ');
  return { client, cookie };
}

/** Headers for a call to process B: the browser's cookie (its jar is keyed by publicUrl, A's origin) and the CSRF header. */
const onB = (browser: Browser) => ({ cookie: browser.cookie, 'x-csrf': '1' });

interface Held {
  ws: HeldWebSocket;
  proxied: HeldStream;
  events: HeldStream;
}

/** Opens, on process A, a proxied WebSocket, a proxied event stream and GET /auth/events. */
async function holdOnA(browser: Browser): Promise<Held> {
  const a = `127.0.0.1:${portA}`;
  const ws = await openWebSocket(`ws://${a}/live/socket`, { cookie: browser.cookie, origin: publicUrl });
  const proxied = await openStream(`http://${a}/live/feed`, { cookie: browser.cookie, 'x-csrf': '1' });
  expect(proxied.status).toBe(200);
  await eventually('the proxied stream to start', 10_000, () => proxied.text().includes('data: first'));
  const events = await openStream(`http://${a}/auth/events`, { cookie: browser.cookie, 'sec-fetch-site': 'same-origin' });
  expect(events.status).toBe(200);
  expect(events.headers['content-type']).toMatch(/^text\/event-stream/);
  await eventually('the event stream to start', 10_000, () => events.text().startsWith('retry: '));
  return { ws, proxied, events };
}

/** Waits (bounded) until all three are closed; returns the slowest close after `since`. */
async function allClosed(held: Held, since: number): Promise<{ ms: number; closes: Closed[] }> {
  const closes = await withTimeout(Promise.all([held.ws.closed, held.proxied.closed, held.events.closed]), CLOSE_BOUND_MS, 'every stream to close');
  return { ms: Math.round(Math.max(...closes.map((c) => c.at)) - since), closes };
}

async function expectSignedOut(held: Held, reason: string): Promise<void> {
  const event = await held.events.waitForEvent('signed-out', CLOSE_BOUND_MS);
  expect(JSON.parse(event.data)).toEqual({ reason });
}

function expectCut(closes: Closed[]): void {
  const [ws, proxied] = closes as [Closed, Closed, Closed];
  // Cut by the gateway, not ended cleanly: no WebSocket close frame, no chunked terminator.
  expect(ws.complete).toBe(false);
  expect(proxied.complete).toBe(false);
}

const stillOpen = (held: Held) => !held.ws.isClosed() && !held.proxied.isClosed() && !held.events.isClosed();

describe('live sessions over two gateway processes on one Redis', () => {
  it('a logout on B closes the WebSocket, the proxied stream and /auth/events on A, which says signed-out: logout', async () => {
    const bob = await signInAs('bob');
    const other = await signInAs('alice');
    const held = await holdOnA(bob);
    const bystander = await holdOnA(other);

    const since = performance.now();
    const res = await bob.client.post(`http://127.0.0.1:${portB}/auth/logout`, { headers: onB(bob) });
    expect(res.status).toBe(200);
    await expectSignedOut(held, 'logout');
    const { ms, closes } = await allClosed(held, since);
    console.log(`logout on B → all three closed on A in ${ms} ms`);
    expectCut(closes);
    // Another user's streams are untouched.
    expect(stillOpen(bystander)).toBe(true);
    bystander.ws.socket.terminate();
    bystander.proxied.destroy();
    bystander.events.destroy();
  }, 90_000);

  it('a back-channel logout closes them with provider-logout', async () => {
    const carol = await signInAs('alice');
    const held = await holdOnA(carol);
    const since = performance.now();
    const res = await new BrowserClient().post(`http://127.0.0.1:${portB}/auth/backchannel-logout`, {
      form: { logout_token: await provider.signLogoutToken({ sub: 'alice' }) },
    });
    expect(res.status).toBe(200);
    await expectSignedOut(held, 'provider-logout');
    const { ms, closes } = await allClosed(held, since);
    console.log(`back-channel logout on B → closed on A in ${ms} ms`);
    expectCut(closes);
  }, 90_000);

  it('DELETE /auth/sessions/{id} from another of the user\'s sessions closes them with revoked', async () => {
    const laptop = await signInAs('bob');
    const phone = await signInAs('bob');
    const held = await holdOnA(laptop);
    const list = (await phone.client.get(`http://127.0.0.1:${portB}/auth/sessions`, { headers: onB(phone) })).json() as Array<{
      id: string;
      current: boolean;
    }>;
    const target = list.find((s) => !s.current);
    expect(target).toBeDefined();
    const since = performance.now();
    const res = await phone.client.request('DELETE', `http://127.0.0.1:${portB}/auth/sessions/${target?.id}`, { headers: onB(phone) });
    expect(res.status).toBe(204);
    await expectSignedOut(held, 'revoked');
    const { ms, closes } = await allClosed(held, since);
    console.log(`DELETE /auth/sessions on B → closed on A in ${ms} ms`);
    expectCut(closes);
  }, 90_000);

  it('the absolute timeout closes them with expired, after a session-ending countdown', async () => {
    const erin = await signInAs('alice');
    const held = await holdOnA(erin);
    // Within the 300 s notice window from the start: the countdown comes on connect.
    const ending = JSON.parse((await held.events.waitForEvent('session-ending', 10_000)).data) as { secondsLeft: number };
    expect(ending.secondsLeft).toBeGreaterThan(0);
    expect(ending.secondsLeft).toBeLessThanOrEqual(SESSION_SECONDS);
    const event = await held.events.waitForEvent('signed-out', (SESSION_SECONDS + 15) * 1000);
    expect(JSON.parse(event.data)).toEqual({ reason: 'expired' });
    const closes = await withTimeout(Promise.all([held.ws.closed, held.proxied.closed, held.events.closed]), CLOSE_BOUND_MS, 'every stream to close');
    expectCut(closes);
  }, (SESSION_SECONDS + 30) * 1000);

  it('a Redis restart closes nothing and the bus comes back; a session that ended meanwhile is closed when Redis returns', async () => {
    const admin = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    await admin.connect();
    const sessionKeys = () => admin.keys(`${PREFIX}sess:*`);
    const kept = await signInAs('alice');
    const before = new Set(await sessionKeys());
    const lapsed = await signInAs('bob');
    const graceKeys = (await sessionKeys()).filter((k) => !before.has(k));
    expect(graceKeys).toHaveLength(1);
    const keptHeld = await holdOnA(kept);
    const lapsedHeld = await holdOnA(lapsed);
    const reconnects = () => processes[0]?.output().split('session_events_reconnected').length ?? 1;
    const reconnectsBefore = reconnects();

    // grace's session runs out while Redis is away (as an idle timeout would).
    await admin.pexpire(graceKeys[0] as string, 1000);
    admin.disconnect();
    await redis.stop();
    // Down for longer than the key had left.
    await new Promise((r) => setTimeout(r, 2000));
    expect(stillOpen(keptHeld)).toBe(true);
    expect(stillOpen(lapsedHeld)).toBe(true);
    await redis.start();

    await eventually('A to re-check after the bus came back', 30_000, () => reconnects() > reconnectsBefore);
    await expectSignedOut(lapsedHeld, 'revoked');
    await withTimeout(Promise.all([lapsedHeld.ws.closed, lapsedHeld.proxied.closed, lapsedHeld.events.closed]), CLOSE_BOUND_MS, 'grace\'s streams');
    expect(stillOpen(keptHeld)).toBe(true);

    // And the bus carries events again.
    const since = performance.now();
    const res = await eventually('a logout on B once Redis is back', 15_000, async () => {
      const r = await kept.client.post(`http://127.0.0.1:${portB}/auth/logout`, { headers: onB(kept) });
      return r.status === 200 ? r : undefined;
    });
    expect(res.status).toBe(200);
    await expectSignedOut(keptHeld, 'logout');
    const { ms } = await allClosed(keptHeld, since);
    console.log(`after the Redis restart: logout on B → closed on A in ${ms} ms`);
  }, 120_000);
  it('SIGTERM ends a draining process\'s event streams cleanly, so that they reconnect elsewhere, and it exits 0', async () => {
    const portC = await findFreePort();
    const c = await startCliGateway(writeConfigFile(tmp, 'c.yaml', configFor(portC, { shutdownTimeoutSeconds: 5 })), portC);
    const browser = await signInAs('alice');
    const events = await openStream(`http://127.0.0.1:${portC}/auth/events`, { cookie: browser.cookie, 'sec-fetch-site': 'same-origin' });
    expect(events.status).toBe(200);
    await eventually('the event stream to start', 10_000, () => events.text().startsWith('retry: '));
    c.child.kill('SIGTERM');
    // Ended (a clean end of the chunked body), not cut when the drain's deadline closes every connection.
    expect((await withTimeout(events.closed, 30_000, 'the event stream to end')).complete).toBe(true);
    expect((await withTimeout(c.exited, 30_000, 'process C to exit')).code).toBe(0);
  }, 90_000);
});
