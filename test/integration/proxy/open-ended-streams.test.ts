/**
 * A proxied answer without Content-Length (NDJSON here) is held with its session once it has
 * been open for a moment (src/proxy/streams.ts HOLD_AFTER_MS), and closed when the session
 * ends: an end heard after the hold, and one heard before it (the hold ends it at once). An
 * ordinary chunked answer that ends by itself is never held (0.5.0 held every one: a
 * subscription, two timers and a gauge update per call).
 *
 * Mutation checks (each by hand, once):
 *  - src/proxy/streams.ts createLongLivedAnswers: `expire: hold` → `expire: () => undefined` →
 *    every test times out (nothing is ever held).
 *  - src/session/held.ts hold: drop `if (ended) setImmediate(...)` → the second test times out.
 *  - src/proxy/streams.ts createLongLivedAnswers.started: `if (kind === 'event-stream')` →
 *    `if (kind)` (hold every long-lived answer at once, as 0.5.0 did) → the third test fails.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { openStream } from '../../support/live-streams.js';
import { startStack, type Stack } from '../../support/stack.js';
import { holdOpen, startUpstream, type Upstream } from '../../support/upstream.js';
import { sessionIdFromCookie } from '../../support/assertions.js';
import { eventually, withTimeout } from '../../support/wait.js';
import { digest } from '../../../src/redis/keys.js';
import type { ServerResponse } from 'node:http';

let upstream: Upstream;
let stack: Stack;
const open = new Set<ServerResponse>();

beforeAll(async () => {
  upstream = await startUpstream();
  upstream.setHandler((req, res) => {
    req.resume();
    if (req.url?.startsWith('/feed/short')) {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.end('{"n":1}\n');
      return;
    }
    holdOpen(res, open, { 'content-type': 'application/x-ndjson' }, '{"n":1}\n');
  });
  stack = await startStack({ config: { routes: [{ path: '/feed', target: upstream.url, auth: 'user' }] } });
});

afterAll(async () => {
  for (const res of open) res.destroy();
  await stack?.close();
  await upstream?.close();
});

async function session(): Promise<{ cookie: string; sessionDigest: string }> {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  const value = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
  return { cookie: `${stack.config.derived.sessionCookieName}=${value}`, sessionDigest: digest(sessionIdFromCookie(value)) };
}

const heldNow = () => stack.gateway.runtime.held.digests();

it('holds an open-ended answer once it has run a moment, and cuts it when the session ends', async () => {
  const { cookie, sessionDigest } = await session();
  const stream = await openStream(`${stack.gateway.url}/feed/live`, { cookie, 'x-csrf': '1' });
  expect(stream.status).toBe(200);
  await eventually('the session to be held', 10_000, () => heldNow().includes(sessionDigest));
  stack.gateway.runtime.events.publish(sessionDigest, { type: 'signed-out', reason: 'logout' });
  expect((await withTimeout(stream.closed, 10_000, 'the stream to close')).complete).toBe(false);
});

it('cuts it too when the session ended before the hold', async () => {
  const { cookie, sessionDigest } = await session();
  const stream = await openStream(`${stack.gateway.url}/feed/live`, { cookie, 'x-csrf': '1' });
  expect(stream.status).toBe(200);
  // At once, before the answer has run long enough to be held.
  stack.gateway.runtime.events.publish(sessionDigest, { type: 'signed-out', reason: 'logout' });
  expect((await withTimeout(stream.closed, 10_000, 'the stream to close')).complete).toBe(false);
});

it('never holds a chunked answer that ends by itself', async () => {
  const { cookie, sessionDigest } = await session();
  const held = stack.gateway.runtime.held;
  const hold = held.hold;
  let holds = 0;
  held.hold = (...args) => {
    holds += 1;
    return hold(...args);
  };
  try {
    const stream = await openStream(`${stack.gateway.url}/feed/short`, { cookie, 'x-csrf': '1' });
    expect((await withTimeout(stream.closed, 10_000, 'the answer to end')).complete).toBe(true);
    expect(stream.text()).toBe('{"n":1}\n');
    // An answer that stays open is held after the moment; the sweep that holds it has passed the
    // ended one (queued first) and dropped it: one hold in all.
    const live = await openStream(`${stack.gateway.url}/feed/live`, { cookie, 'x-csrf': '1' });
    await eventually('the open one to be held', 10_000, () => heldNow().includes(sessionDigest));
    expect(holds).toBe(1);
    live.destroy();
  } finally {
    held.hold = hold;
  }
});
