/**
 * The session-event bus's subscriber goes deaf without closing: a NAT or load balancer that
 * dropped the idle connection silently, a Redis node that hangs. ioredis never notices (nothing
 * closes), so it never reconnects, and the instance no longer heard of sessions ended elsewhere:
 * their streams stayed open on it until their idle deadline (found by red team, on a Cluster
 * node that hung). Each instance publishes a probe of its own every 5 s; one that does not come
 * back makes it subscribe again and re-check the sessions it holds.
 *
 * Mutations that fail this file (checked by hand): src/redis/pubsub.ts check(), the line
 * `if (awaited !== undefined && heard < awaited) return renew();` removed; renew() ending the
 * deaf subscriber with `deaf.disconnect()` (its command-deadline tick never stopped).
 */
import { randomBytes } from 'node:crypto';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { openStream } from '../../support/live-streams.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { redisUrlForTests } from '../../support/redis-server.js';
import { startTcpGate, type TcpGate } from '../../support/tcp-gate.js';
import { eventually } from '../../support/wait.js';

let provider: TestProvider;
let gate: TcpGate;
let a: TestGateway;
let b: TestGateway;

beforeAll(async () => {
  const front = await reserveServer();
  provider = await startTestProvider({ clients: [gatewayClient(front.url)] });
  gate = await startTcpGate(redisUrlForTests());
  const keyPrefix = `deaf${randomBytes(4).toString('hex')}:`;
  const session = { secrets: [randomBytes(32).toString('base64url')], encryptionKeys: [randomBytes(32).toString('base64')] };
  const config = (redisUrl: string) => buildTestConfig({ issuer: provider.issuer, publicUrl: front.url, keyPrefix, redisUrl, session });
  // A reaches Redis through the gate, on the reserved public URL; B directly, on a port of its own.
  a = await startTestGateway(config(gate.url), front);
  b = await startTestGateway(config(redisUrlForTests()));
}, 60_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  await gate?.close();
  await provider?.close();
});

it("closes an instance's event stream of a session ended elsewhere, after its subscriber went deaf", async () => {
  const client = new BrowserClient();
  await signIn(client, a.url);
  const cookie = `${a.config.derived.sessionCookieName}=${client.cookies(a.url)[a.config.derived.sessionCookieName] as string}`;
  const stream = await openStream(`${a.url}/auth/events`, { cookie });
  expect(stream.status).toBe(200);
  await eventually('A subscribed through the gate', 10_000, () => gate.deafenSubscribers() === 1);

  const out = await new BrowserClient().post(`${b.url}/auth/logout`, { headers: { 'x-csrf': '1', cookie } });
  expect(out.status).toBe(200);
  await stream.waitForEvent('signed-out', 20_000);
  expect(a.logs.some((line) => line.includes('"session_events_resubscribed"'))).toBe(true);
}, 60_000);

/** Command-deadline ticks (redis/deadlines.ts) started and not stopped since `track()`. */
const ticking = new Set<unknown>();
/** Starts counting; returns the function that stops. */
function track(): () => void {
  const set = globalThis.setInterval;
  const clear = globalThis.clearInterval;
  globalThis.setInterval = ((fn: () => void, ms: number) => {
    const t = set(fn, ms);
    if (/redis[\\/]deadlines/.test(new Error().stack ?? '')) ticking.add(t);
    return t;
  }) as typeof setInterval;
  globalThis.clearInterval = ((t: NodeJS.Timeout) => {
    ticking.delete(t);
    return clear(t);
  }) as typeof clearInterval;
  return () => {
    globalThis.setInterval = set;
    globalThis.clearInterval = clear;
  };
}

it('a renewed subscriber leaves no command-deadline tick behind (a NAT that drops idle connections renews it again and again)', async () => {
  const renewals = () => a.logs.filter((l) => l.includes('"session_events_resubscribed"')).length;
  const before = renewals();
  const untrack = track();
  try {
    // Two renewals: the first one's new subscriber (tracked) is the second one's deaf one.
    for (const n of [1, 2]) {
      // A renewal takes one or two probe periods (5 s each); generous bounds for a busy CI host.
      await eventually(`subscriber ${n} subscribed`, 20_000, () => gate.deafenSubscribers() >= 1);
      await eventually(`renewal ${n}`, 45_000, () => renewals() >= before + n);
    }
  } finally {
    untrack();
  }
  // Only the live subscriber's own tick: the renewed one's was stopped.
  expect(ticking.size).toBe(1);
}, 150_000);
