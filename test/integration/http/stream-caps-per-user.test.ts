/**
 * The shared caps on long-lived connections (a route's WebSockets, a process's event streams)
 * cannot be taken by one user: a user may hold any number of sessions (signed in again and
 * again), and the caps were per session only. Sixteen sessions of one account held a route's 512
 * WebSockets, and every other user's upgrade was refused (found by red team).
 *
 * Mutations that fail this file (checked by hand):
 * - src/proxy/streams.ts createStreamLimit: the per-user check `if (auth !== undefined && …)`
 *   made `if (false)`: the WebSocket test (alice held 160).
 * - src/http/events-route.ts admit: `!perUser.admit(user, res, maxPerUser)` made `false`:
 *   the event-stream test.
 */
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { MAX_STREAMS_PER_SESSION, MAX_STREAMS_PER_USER } from '../../../src/proxy/streams.js';
import { withTimeout } from '../../support/wait.js';

const EVENT_STREAMS_PER_SESSION = 8;
const EVENT_STREAMS_PER_USER = 32;
let upstream: Upstream;
let stack: Stack;
const sockets: net.Socket[] = [];

beforeAll(async () => {
  upstream = await startUpstream({ websocket: true });
  stack = await startStack({
    provider: { users: ['alice', 'bob', 'carol', 'dave'].map((id) => ({ id, password: `${id}-password`, claims: { name: id, email: `${id}@example.com` } })) },
    config: { routes: [{ path: '/live', target: upstream.url, auth: 'user', websocket: true, maxConnections: 200 }] },
    app: { eventStream: { maxPerSession: EVENT_STREAMS_PER_SESSION, maxPerUser: EVENT_STREAMS_PER_USER, maxOpen: 40 } },
  });
}, 60_000);

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await stack?.close();
  await upstream?.close();
});

/** Sends `head` on a connection kept open; resolves with the answer's status. */
function open(head: string): Promise<number> {
  const url = new URL(stack.gateway.url);
  const answered = new Promise<number>((resolve, reject) => {
    const socket = net.connect({ host: url.hostname, port: Number(url.port) }, () => socket.write(head));
    sockets.push(socket);
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (status) resolve(Number(status[1]));
    });
    socket.on('error', reject);
  });
  return withTimeout(answered, 10_000, 'an answer head');
}

/** `n` sessions of one user, as session cookies. */
async function sessionsOf(user: string, n: number): Promise<string[]> {
  const { url, config } = stack.gateway;
  const name = config.derived.sessionCookieName;
  const client = new BrowserClient();
  const cookies: string[] = [];
  for (let i = 0; i < n; i++) {
    client.deleteCookie(url, name);
    await signIn(client, url, { user, password: `${user}-password` });
    cookies.push(`${name}=${client.cookies(url)[name] as string}`);
  }
  return cookies;
}

const host = () => new URL(stack.gateway.url).host;
const upgrade = (cookie: string) =>
  open(
    `GET /live/socket HTTP/1.1\r\nHost: ${host()}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nOrigin: ${stack.config.derived.publicOrigin}\r\n` +
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\nCookie: ${cookie}\r\n\r\n`,
  );
const eventStream = (cookie: string) => open(`GET /auth/events HTTP/1.1\r\nHost: ${host()}\r\nCookie: ${cookie}\r\n\r\n`);
const count = (statuses: number[]) => statuses.reduce<Record<number, number>>((c, s) => ({ ...c, [s]: (c[s] ?? 0) + 1 }), {});

it("one user's sessions hold at most their share of a route's WebSockets: another user's upgrade still succeeds", async () => {
  const sessions = MAX_STREAMS_PER_USER / MAX_STREAMS_PER_SESSION + 1;
  const alice = await sessionsOf('alice', sessions);
  const [bob] = await sessionsOf('bob', 1);
  const statuses = await Promise.all(alice.flatMap((cookie) => Array.from({ length: MAX_STREAMS_PER_SESSION }, () => upgrade(cookie))));
  expect(count(statuses)).toEqual({ 101: MAX_STREAMS_PER_USER, 429: MAX_STREAMS_PER_SESSION });
  expect(await upgrade(bob as string)).toBe(101);
});

it("one user's sessions hold at most their share of the process's event streams: another user's still opens", async () => {
  const sessions = EVENT_STREAMS_PER_USER / EVENT_STREAMS_PER_SESSION + 1;
  const carol = await sessionsOf('carol', sessions);
  const [dave] = await sessionsOf('dave', 1);
  const statuses = await Promise.all(carol.flatMap((cookie) => Array.from({ length: EVENT_STREAMS_PER_SESSION }, () => eventStream(cookie))));
  expect(count(statuses)).toEqual({ 200: EVENT_STREAMS_PER_USER, 429: EVENT_STREAMS_PER_SESSION });
  expect(await eventStream(dave as string)).toBe(200);
});
