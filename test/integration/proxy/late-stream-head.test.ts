/**
 * A proxied long-lived answer whose head arrives more than a minute after its session ended
 * (found by the WebSocket red team): proxy/streams.ts holds an answer when its head arrives,
 * and a session that ended before is caught through events.recentEnd, which remembers ends for
 * 60 s (RECENT_END_MS). A route whose timeoutSeconds passes that (a long poll) lets the head
 * come later: the stream ran on for the whole idle timeout (30 min by default). Such a route's
 * streams check the session as they are held. The minute is the gateway's test clock.
 *
 * Mutation check (by hand, once): src/session/held.ts hold, `else if (verify) void
 * checkIdle(sessionDigest, held);` removed: the test fails (the stream stays open).
 */
import type { ServerResponse } from 'node:http';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { openStream } from '../../support/live-streams.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { createTestClock } from '../../support/gateway.js';

const clock = createTestClock();
let stack: Stack;
let live: Upstream;
let client: BrowserClient;
let cookie: string;
let pending: ServerResponse | undefined;

beforeAll(async () => {
  live = await startUpstream({ websocket: true });
  stack = await startStack({ clock, config: { routes: [{ path: '/live', target: live.url, auth: 'user', timeoutSeconds: 300 }] } });
  client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  cookie = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
}, 60_000);

afterAll(async () => {
  pending?.destroy();
  await stack?.close();
  await live?.close();
}, 30_000);

it('cuts a streamed answer whose head arrives over a minute after its session ended', async () => {
  let arrived: () => void = () => undefined;
  const reached = new Promise<void>((resolve) => (arrived = resolve));
  live.setHandler((_req, res) => {
    pending = res;
    arrived();
  });
  const streamP = openStream(`${stack.gateway.url}/live/poll`, { cookie: `${stack.config.derived.sessionCookieName}=${cookie}`, 'x-csrf': '1' }, 30_000);
  await reached;
  // The user signs out while the long poll waits for its answer.
  const out = await client.post(`${stack.gateway.url}/auth/logout`, { headers: { 'x-csrf': '1' } });
  expect(out.status).toBe(200);
  // More than a minute passes before the upstream answers (a long poll on a 300 s route).
  clock.advance(61);
  pending?.writeHead(200, { 'content-type': 'application/x-ndjson' });
  pending?.write('{"n":1}\n');
  const stream = await streamP;
  expect(stream.status).toBe(200);
  const timer = setInterval(() => pending?.write('{"n":2}\n'), 200);
  try {
    // Bounded wait for the cut (an open-ended answer is held once it has run a moment).
    const closedInTime = await Promise.race([stream.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 10_000))]);
    expect({ closedSoonAfterBeingHeld: closedInTime }).toEqual({ closedSoonAfterBeingHeld: true });
  } finally {
    clearInterval(timer);
    stream.destroy();
  }
}, 60_000);
