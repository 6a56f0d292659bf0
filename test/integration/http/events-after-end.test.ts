/**
 * Nothing is written to a GET /auth/events stream once it has ended (issue 16 review). The
 * stream ends on its session's end (or a drain) but stays tracked until its connection closes,
 * which a client that stops reading can put off for as long as its socket buffer holds; an
 * event or heartbeat written in between was a write after end: an uncaught
 * ERR_STREAM_WRITE_AFTER_END, which stops the gateway process. Here the end and the next event
 * come in one tick, so the window is always open.
 *
 * Mutation check (done by hand once): src/http/events-route.ts, `send`: delete the line
 * `if (res.writableEnded) return;` → the test fails with "write after end". (The same guard on
 * the shared heartbeat is not pinned here: its tick landing in the window is not deterministic.)
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { openStream } from '../../support/live-streams.js';
import { startStack, type Stack } from '../../support/stack.js';
import { sessionIdFromCookie } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';
import { digest } from '../../../src/redis/keys.js';

let stack: Stack;
let cookieValue: string;
const uncaught: unknown[] = [];
const onUncaught = (err: unknown) => uncaught.push(err);

beforeAll(async () => {
  stack = await startStack({ app: { eventStream: { heartbeatMs: 50 } } });
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  cookieValue = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
  process.prependListener('uncaughtException', onUncaught);
});

afterAll(async () => {
  process.removeListener('uncaughtException', onUncaught);
  await stack?.close();
});

it('an event published just after the end is not written, and the gateway keeps serving', async () => {
  const cookie = `${stack.config.derived.sessionCookieName}=${cookieValue}`;
  const stream = await openStream(`${stack.gateway.url}/auth/events`, { cookie, 'sec-fetch-site': 'same-origin' });
  expect(stream.status).toBe(200);
  const sessionDigest = digest(sessionIdFromCookie(cookieValue));
  const { events } = stack.gateway.runtime;
  events.publish(sessionDigest, { type: 'signed-out', reason: 'revoked' });
  events.publish(sessionDigest, { type: 'step-up-required', loginUrl: '/auth/login?acr_values=mfa' });
  expect(JSON.parse((await stream.waitForEvent('signed-out', 10_000)).data)).toEqual({ reason: 'revoked' });
  expect((await stream.closed).complete).toBe(true);
  expect(stream.events().map((e) => e.event)).toEqual(['signed-out']);
  const health = await new BrowserClient().get(`${stack.gateway.url}/healthz`);
  expect(health.status).toBe(200);
  await eventually('the stream to be let go', 10_000, async () => {
    const text = await stack.gateway.runtime.metrics.registry.getSingleMetricAsString('bff_event_streams_open');
    return /bff_event_streams_open 0/.test(text);
  });
  expect(uncaught).toEqual([]);
});
