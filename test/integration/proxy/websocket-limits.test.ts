/**
 * WebSocket tunnels are bounded (found by the WebSocket red team): a session holds at most
 * MAX_STREAMS_PER_SESSION long-lived connections through a process, its tunnels and proxied
 * event streams together, and a route at most `maxConnections` tunnels. One cookie opened as
 * many as it liked: two file descriptors each in the gateway and an upstream connection outside
 * the route's pool, until the process could accept no one. Real provider, Redis and upstreams.
 *
 * Mutation checks (by hand, once), in src/http/websocket.ts upgrade:
 * - drop `if (crowd) throw crowd;`: both tests fail (40 tunnels open; 12 on the 4-connection route);
 * - in admit, `deps.streamLimit.admit(session.digest, socket)` → `undefined`: the first fails.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { rawUpgrade, rawExchange } from '../../support/raw-http.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { openWebSocket, type HeldWebSocket } from '../../support/live-streams.js';
import { eventually } from '../../support/wait.js';
import { MAX_STREAMS_PER_SESSION } from '../../../src/proxy/streams.js';

const SMALL_POOL = 4;

let stack: Stack;
let live: Upstream;
let small: Upstream;
let cookie: string;
const held: HeldWebSocket[] = [];

beforeAll(async () => {
  live = await startUpstream({ websocket: true });
  small = await startUpstream({ websocket: true });
  stack = await startStack({
    config: {
      routes: [
        { path: '/live', target: live.url, auth: 'user', websocket: true },
        { path: '/small', target: small.url, auth: 'none', websocket: true, maxConnections: SMALL_POOL },
      ],
    },
  });
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  cookie = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
}, 60_000);

afterEach(async () => {
  for (const h of held.splice(0)) h.socket.terminate();
  await eventually('the upstreams to hold no WebSocket', 10_000, () => (live.openWebSockets === 0 && small.openWebSockets === 0) || undefined);
});

afterAll(async () => {
  await stack?.close();
  await live?.close();
  await small?.close();
}, 30_000);

const headers = () => ({ origin: stack.config.derived.publicOrigin, cookie: `${stack.config.derived.sessionCookieName}=${cookie}` });
const wsUrl = (path: string) => `${stack.gateway.url.replace(/^http/, 'ws')}${path}`;

/** Opens `n` WebSockets on `path`, one after another, with the one session; how many opened. */
async function openMany(path: string, n: number): Promise<number> {
  let opened = 0;
  for (let i = 0; i < n; i += 1) {
    try {
      held.push(await openWebSocket(wsUrl(`${path}/s${i}`), headers(), 10_000));
      opened += 1;
    } catch {
      // refused: not opened
    }
  }
  return opened;
}

it(`holds a session to ${MAX_STREAMS_PER_SESSION} tunnels and event streams together (429 past it), and lets one more open once one closes`, async () => {
  expect(await openMany('/live', MAX_STREAMS_PER_SESSION - 1)).toBe(MAX_STREAMS_PER_SESSION - 1);
  // A proxied event stream is the last one the session may hold.
  let firstEvent!: () => void;
  const streaming = new Promise<void>((resolve) => (firstEvent = resolve));
  const sse = rawExchange(stack.gateway.url, {
    method: 'GET',
    target: '/live/sse',
    headers: { 'x-csrf': '1', cookie: headers().cookie, accept: 'text/event-stream' },
    onBody: (text) => text.includes('data: first') && firstEvent(),
  });
  await Promise.race([streaming, sse]);
  const refused = await rawUpgrade(stack.gateway.url, '/live/one-more', headers());
  expect(refused.status).toBe(429);
  expect(JSON.parse(refused.text)).toMatchObject({ error: 'rate_limited' });
  // SPEC §6: a 429 says when to try again (found by the contract audit; fails if
  // src/http/websocket.ts refuse() writes no `extra` headers).
  expect(refused.headers.get('retry-after')).toBe('30');
  expect(live.openWebSockets).toBe(MAX_STREAMS_PER_SESSION - 1);

  (held.pop() as HeldWebSocket).socket.terminate();
  await eventually('a tunnel to have closed', 10_000, () => live.openWebSockets === MAX_STREAMS_PER_SESSION - 2 || undefined);
  await eventually('a tunnel to open again', 10_000, async () => {
    const again = await openWebSocket(wsUrl('/live/again'), headers(), 10_000).catch(() => undefined);
    if (again) held.push(again);
    return again;
  });
  expect((await fetch(`${live.url}/sse-release`, { method: 'POST' })).status).toBe(200);
  expect((await sse).status).toBe(200);
}, 120_000);

it(`holds a route to its maxConnections (${SMALL_POOL}) tunnels, whoever opens them`, async () => {
  expect(await openMany('/small', SMALL_POOL * 3)).toBe(SMALL_POOL);
  expect(small.openWebSockets).toBe(SMALL_POOL);
  const refused = await rawUpgrade(stack.gateway.url, '/small/more', { origin: stack.config.derived.publicOrigin });
  expect(refused.status).toBe(429);
  // Fails if src/http/websocket.ts admit()'s per-route refusal has no `headers: STREAM_RETRY_AFTER`.
  expect(refused.headers.get('retry-after')).toBe('30');
}, 120_000);
