/**
 * GET /auth/events is bounded (issue 16 follow-up): one cookie opening stream after stream gets
 * 429 rate_limited with Retry-After past its per-session cap on this process, the whole process
 * past its own cap, and a closed stream gives its place back. Every open stream gets the one
 * shared heartbeat. Real provider, real Redis, one in-process gateway with small caps.
 *
 * Mutation checks (done by hand once):
 *   - src/http/events-route.ts: delete the line `admit(res, digest, userDigest(auth.iss, auth.sub));`
 *     → the fourth stream of a session opens with 200 and "refuses the stream past the
 *     per-session cap" fails.
 *   - src/proxy/streams.ts createOpenCount (which counts them): `const left = (open.get(key) ?? 1)
 *     - 1;` → `- 0` → a closed stream never gives its place back and "a closed stream gives its
 *     place back" fails with 429.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { openStream, type HeldStream } from '../../support/live-streams.js';
import { startStack, type Stack } from '../../support/stack.js';
import { expectErrorBody } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';

const PER_SESSION = 3;
const PER_PROCESS = 5;

let stack: Stack;
const cookies: string[] = [];
const opened: HeldStream[] = [];

beforeAll(async () => {
  stack = await startStack({ app: { eventStream: { heartbeatMs: 200, maxPerSession: PER_SESSION, maxOpen: PER_PROCESS } } });
  for (let i = 0; i < 2; i += 1) {
    const client = new BrowserClient();
    await signIn(client, stack.gateway.url);
    const name = stack.config.derived.sessionCookieName;
    cookies.push(`${name}=${client.cookies(stack.gateway.url)[name] as string}`);
  }
});

afterAll(async () => {
  for (const s of opened) s.destroy();
  await stack?.close();
});

async function open(session: number): Promise<HeldStream> {
  const s = await openStream(`${stack.gateway.url}/auth/events`, { cookie: cookies[session] as string, 'sec-fetch-site': 'same-origin' });
  opened.push(s);
  return s;
}

async function openGauge(): Promise<number> {
  const text = await stack.gateway.runtime.metrics.registry.getSingleMetricAsString('bff_event_streams_open');
  return Number(/bff_event_streams_open (\d+)/.exec(text)?.[1]);
}

/** The 429 as a stream client sees it: status, Retry-After and the error body. */
async function expectRefused(s: HeldStream, description: string): Promise<void> {
  expect(s.status).toBe(429);
  expect(s.headers['retry-after']).toBe('30');
  expect((await s.closed).complete).toBe(true);
  const headers = new Headers(Object.entries(s.headers).map(([k, v]): [string, string] => [k, String(v)]));
  expectErrorBody({ status: s.status, text: s.text(), headers }, 'rate_limited', 429);
  expect(JSON.parse(s.text())).toEqual({ error: 'rate_limited', error_description: description });
}

describe('GET /auth/events bounds', () => {
  const first: HeldStream[] = [];

  it('refuses the stream past the per-session cap with 429 rate_limited and Retry-After; every open stream gets heartbeats', async () => {
    for (let i = 0; i < PER_SESSION; i += 1) first.push(await open(0));
    for (const s of first) expect(s.status).toBe(200);
    await expectRefused(await open(0), 'This session has too many event streams open.');
    for (const s of first) await eventually('a heartbeat on every stream', 10_000, () => s.text().includes(': heartbeat'));
    expect(await openGauge()).toBe(PER_SESSION);
  });

  it("does not count one session's streams against another's, and refuses past the process cap", async () => {
    const second = [await open(1), await open(1)];
    for (const s of second) expect(s.status).toBe(200);
    await expectRefused(await open(1), 'This gateway holds too many event streams.');
  });

  it('a closed stream gives its place back', async () => {
    first[0]?.destroy();
    await eventually('the gateway to see the stream go', 10_000, async () => (await openGauge()) === PER_PROCESS - 1);
    const again = await open(0);
    expect(again.status).toBe(200);
    await eventually('a heartbeat on the new stream', 10_000, () => again.text().includes(': heartbeat'));
  });
});
