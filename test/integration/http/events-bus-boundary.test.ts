/**
 * What arrives on the session-event channel from Redis is outside input (issue 16 review): a
 * message for another session never closes this session's GET /auth/events stream, and a
 * malformed one (too large, not JSON, a field of the wrong shape, an unknown reason, a step-up
 * loginUrl to another host) is dropped and counted, even when it names this session. A valid end
 * for this session, sent the same way, closes the stream (the channel is the right one). Real
 * Redis: the messages are PUBLISHed by a client of the test, as another instance (or anyone with
 * Redis access) would.
 *
 * Mutation check (done by hand once): src/session/events.ts, parseWire: delete
 * `if (message.length > 32768) return undefined;` → the oversized (but well-formed) end closes the
 * stream and the test fails.
 */
import { Redis } from 'ioredis';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { openStream, type HeldStream } from '../../support/live-streams.js';
import { startStack, type Stack } from '../../support/stack.js';
import { sessionIdFromCookie } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';
import { digest } from '../../../src/redis/keys.js';

let stack: Stack;
let publisher: Redis;
const sessions: Array<{ cookie: string; digest: string }> = [];
const opened: HeldStream[] = [];

beforeAll(async () => {
  stack = await startStack({ app: { eventStream: { heartbeatMs: 200 } } });
  publisher = new Redis(stack.config.redis.url as string, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await publisher.connect();
  for (let i = 0; i < 2; i += 1) {
    const client = new BrowserClient();
    await signIn(client, stack.gateway.url);
    const value = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
    sessions.push({ cookie: `${stack.config.derived.sessionCookieName}=${value}`, digest: digest(sessionIdFromCookie(value)) });
  }
});

afterAll(async () => {
  for (const s of opened) s.destroy();
  publisher?.disconnect();
  await stack?.close();
});

async function open(i: number): Promise<HeldStream> {
  const s = await openStream(`${stack.gateway.url}/auth/events`, { cookie: sessions[i]?.cookie as string, 'sec-fetch-site': 'same-origin' });
  opened.push(s);
  expect(s.status).toBe(200);
  return s;
}

async function received(kind: string): Promise<number> {
  const text = await stack.gateway.runtime.metrics.registry.getSingleMetricAsString('bff_session_events_received_total');
  return Number(new RegExp(`kind="${kind}"} (\\d+)`).exec(text)?.[1] ?? 0);
}

const publish = (message: string) => publisher.publish(stack.gateway.runtime.keys.endedChannel(), message);
const wire = (d: string, e: unknown, extra: Record<string, unknown> = {}) => JSON.stringify({ o: 'another-instance', d, t: Date.now(), e, ...extra });

it('drops malformed messages and ends for other sessions; a valid end for this session closes its stream', async () => {
  const mine = sessions[0]?.digest as string;
  const other = sessions[1]?.digest as string;
  const stream = await open(0);
  const otherStream = await open(1);
  const malformedBefore = await received('malformed');
  const signedOutBefore = await received('signed-out');

  const malformed = [
    wire(mine, { type: 'signed-out', reason: 'logout' }, { pad: 'x'.repeat(40_000) }), // too large (past 32 KiB)
    '{"o":"another-instance","d":', // not JSON
    wire(mine, { type: 'signed-out', reason: 'logout' }, { t: 'now' }),
    wire(`${mine}x`, { type: 'signed-out', reason: 'logout' }),
    wire(mine, { type: 'signed-out', reason: 'bored' }),
    wire(mine, [{ type: 'signed-out', reason: 'logout' }]),
    wire(mine, { type: 'step-up-required', loginUrl: '//evil.example/auth/login' }),
    wire(mine, { type: 'step-up-required', loginUrl: '/auth/login', acr_values: 'a\nb' }),
  ];
  for (const message of malformed) await publish(message);
  await publish(wire(other, { type: 'signed-out', reason: 'revoked' }));

  expect(JSON.parse((await otherStream.waitForEvent('signed-out', 10_000)).data)).toEqual({ reason: 'revoked' });
  await eventually('every message counted', 10_000, async () => (await received('malformed')) - malformedBefore === malformed.length);
  expect((await received('signed-out')) - signedOutBefore).toBe(1);
  // Messages are handled in order: all of them were seen, and this stream is untouched.
  const heartbeats = stream.text().split(': heartbeat').length;
  await eventually('one more heartbeat on this stream', 10_000, () => stream.text().split(': heartbeat').length > heartbeats);
  expect(stream.isClosed()).toBe(false);
  expect(stream.events()).toEqual([]);

  await publish(wire(mine, { type: 'signed-out', reason: 'provider-logout' }));
  expect(JSON.parse((await stream.waitForEvent('signed-out', 10_000)).data)).toEqual({ reason: 'provider-logout' });
  expect((await stream.closed).complete).toBe(true);
});
