/**
 * Proxied event streams one session may hold open through a process (src/proxy/streams.ts
 * MAX_STREAMS_PER_SESSION): each holds an upstream connection as long as it runs, and one
 * session (a script, not a browser) held a route's every connection, so that every other user's
 * calls there waited, then got 504 (found by red team). Past the bound: 429 rate_limited, the
 * upstream's stream cut; another session is not counted against it; a closed stream frees its place.
 *
 * Fails if, in src/http/proxy-routes.ts onLongLived, the limit is not asked
 * (`kind === 'event-stream' ? streamLimit.admit(owner.digest, res) : undefined` → `undefined`).
 */
import type { ServerResponse } from 'node:http';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { openStream, type HeldStream } from '../../support/live-streams.js';
import { startStack, type Stack } from '../../support/stack.js';
import { holdOpen, startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually } from '../../support/wait.js';
import { MAX_STREAMS_PER_SESSION } from '../../../src/proxy/streams.js';

let upstream: Upstream;
let stack: Stack;
const upstreamStreams = new Set<ServerResponse>();
const held: HeldStream[] = [];

beforeAll(async () => {
  upstream = await startUpstream();
  upstream.setHandler((req, res) => {
    req.resume();
    holdOpen(res, upstreamStreams, { 'content-type': 'text/event-stream' }, ': open\n\n');
  });
  stack = await startStack({ config: { routes: [{ path: '/events', target: upstream.url, auth: 'user' }] } });
});

afterAll(async () => {
  for (const stream of held) stream.destroy();
  for (const res of upstreamStreams) res.destroy();
  await stack?.close();
  await upstream?.close();
});

async function cookieOf(): Promise<string> {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  return `${stack.config.derived.sessionCookieName}=${client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string}`;
}

const open = async (cookie: string) => {
  const stream = await openStream(`${stack.gateway.url}/events/live`, { cookie, 'x-csrf': '1' });
  held.push(stream);
  return stream;
};

it('answers 429 past the bound for one session, not for another; a closed stream frees its place', async () => {
  const [alice, bob] = [await cookieOf(), await cookieOf()];
  const streams: HeldStream[] = [];
  for (let i = 0; i < MAX_STREAMS_PER_SESSION; i++) streams.push(await open(alice));
  expect(streams.map((s) => s.status)).toEqual(new Array<number>(MAX_STREAMS_PER_SESSION).fill(200));

  const refused = await open(alice);
  expect(refused.status).toBe(429);
  // SPEC §6 (found by the contract audit). Fails if src/proxy/streams.ts's per-session refusal
  // has no `headers: STREAM_RETRY_AFTER`.
  expect(refused.headers['retry-after']).toBe('30');
  expect(JSON.parse(await refused.closed.then(() => refused.text())) as { error: string }).toMatchObject({ error: 'rate_limited' });
  // The upstream's side of the refused stream was cut: only the admitted ones stay open there.
  await eventually('the refused stream cut at the upstream', 5000, () => upstreamStreams.size === MAX_STREAMS_PER_SESSION || undefined);

  expect((await open(bob)).status).toBe(200);

  (streams[0] as HeldStream).destroy();
  await eventually('a place freed', 5000, async () => {
    const again = await open(alice);
    if (again.status === 200) return true;
    return undefined;
  });
});
