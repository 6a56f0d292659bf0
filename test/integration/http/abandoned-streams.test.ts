/**
 * A client that goes away while the gateway reads its session (trust-boundary review of issue
 * 16): its connection's 'close' has been and gone by the time the read answers, so a stream
 * tracked from there would never be released: the session held for ever (and its timers), the
 * open gauges wrong, and a place under GET /auth/events' per-session cap taken for good (so a
 * cookie could lock its session out, or, with many cookies, the process cap everyone). Redis is
 * stalled (SIGSTOP) while the client leaves, so the read surely answers after the close.
 *
 * Mutation checks (done by hand once):
 *   - src/http/events-route.ts: delete `if (req.socket.destroyed) return;` → the stream opened
 *     after the abandoned one gets 429 (the abandoned one kept the session's only place).
 *   - src/http/websocket.ts: delete `if (socket.destroyed) return;` → bff_websockets_open never
 *     drops back to 0 and the session stays held.
 *
 * And a client that goes away while its WebSocket's credential is fetched (security review):
 * the credential arriving afterwards must not open an upstream WebSocket that nothing would
 * ever close (the session hold is released already, so not even a logout could).
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { openStream } from '../../support/live-streams.js';
import { rawUpgrade } from '../../support/raw-http.js';
import { startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually, withTimeout } from '../../support/wait.js';

let redis: RedisServer;
let upstream: Upstream;
let stack: Stack;
let cookie: string;

beforeAll(async () => {
  redis = await startRedisServer();
  upstream = await startUpstream({ websocket: true });
  stack = await startStack({
    client: { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] },
    app: { eventStream: { maxPerSession: 1 } },
    config: {
      redisUrl: redis.url,
      redis: { commandTimeoutMs: 20_000 },
      routes: [
        { path: '/live', target: upstream.url, auth: 'user', websocket: true },
        // No session to read: the first await is the client token, read from (stalled) Redis.
        { path: '/service-live', target: upstream.url, auth: 'client', websocket: true },
      ],
    },
  });
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  const name = stack.config.derived.sessionCookieName;
  cookie = `${name}=${client.cookies(stack.gateway.url)[name] as string}`;
});

afterAll(async () => {
  redis?.resume();
  await stack?.close();
  await upstream?.close();
  await redis?.close();
});

async function gauge(name: string): Promise<number> {
  const text = await stack.gateway.runtime.metrics.registry.getSingleMetricAsString(name);
  return [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)`, 'gm'))].reduce((sum, m) => sum + Number(m[1]), 0);
}

/**
 * Stalls Redis, lets `send` reach the gateway, cuts that connection on the gateway's side (as a
 * client leaving would) once `event` fired for it, waits for the close, and lets Redis go on.
 */
async function abandonWhileReading(event: 'request' | 'upgrade', send: () => Promise<unknown>): Promise<void> {
  const { server } = stack.gateway;
  let listener: ((req: IncomingMessage, socket?: Socket) => void) | undefined;
  const closed = new Promise<void>((done) => {
    listener = (req: IncomingMessage, socket?: Socket) => {
      const s = socket ?? req.socket;
      s.once('close', () => done());
      s.destroy();
    };
    server.once(event, listener);
  });
  redis.pause();
  try {
    const sent = send().catch(() => undefined); // the client sees its connection cut
    await withTimeout(closed, 10_000, 'the abandoned connection to close');
    await withTimeout(sent, 10_000, 'the client to see the cut');
  } finally {
    redis.resume();
  }
}

describe('a client that leaves while its session is read', () => {
  it('GET /auth/events: nothing stays tracked, and its place under the per-session cap is free', async () => {
    await abandonWhileReading('request', () => openStream(`${stack.gateway.url}/auth/events`, { cookie, 'sec-fetch-site': 'same-origin' }));
    // Redis answers in order: once this later read has its answer the abandoned one had its own.
    const next = await openStream(`${stack.gateway.url}/auth/events`, { cookie, 'sec-fetch-site': 'same-origin' });
    expect(next.status).toBe(200);
    next.destroy();
    await eventually('no event stream open', 10_000, async () => (await gauge('bff_event_streams_open')) === 0);
    await eventually('no session held', 10_000, () => stack.gateway.runtime.held.digests().length === 0);
  });

  it('a WebSocket upgrade: nothing stays tracked or held', async () => {
    const headers = { origin: stack.config.derived.publicOrigin, cookie };
    await abandonWhileReading('upgrade', () => rawUpgrade(stack.gateway.url, '/live/socket', headers));
    const next = await rawUpgrade(stack.gateway.url, '/live/socket', headers);
    expect(next.status).toBe(101); // rawUpgrade closes it at once
    await eventually('no WebSocket open', 10_000, async () => (await gauge('bff_websockets_open')) === 0);
    await eventually('no session held', 10_000, () => stack.gateway.runtime.held.digests().length === 0);
  });
});

describe('a client that leaves while its WebSocket credential is fetched', () => {
  /**
   * Fails if, in src/http/websocket.ts, the `if (socket.destroyed) return;` after
   * resolveCredential is removed: openTunnel's own guard then refuses the gone browser, reported
   * as a failed upgrade (the log check). With that guard removed too (its own test is in
   * proxy/websocket.test.ts), the abandoned handshake reaches the upstream and stays open.
   */
  it('opens no upstream WebSocket, and reports no failure', async () => {
    upstream.reset();
    const logsBefore = stack.gateway.logs.length;
    const { server } = stack.gateway;
    const closed = new Promise<void>((done) => {
      server.once('upgrade', (_req: IncomingMessage, socket: Socket) => {
        socket.once('close', () => done());
        // After the (absent) session was read, so while the client token is read from Redis.
        setImmediate(() => socket.destroy());
      });
    });
    const headers = { origin: stack.config.derived.publicOrigin };
    redis.pause();
    try {
      const sent = rawUpgrade(stack.gateway.url, '/service-live/socket', headers).catch(() => undefined);
      await withTimeout(closed, 10_000, 'the abandoned connection to close');
      await withTimeout(sent, 10_000, 'the client to see the cut');
    } finally {
      redis.resume();
    }
    // This one waits on the same client token: the abandoned one's credential arrives first, so
    // an upstream handshake it sent would reach the upstream before this one's.
    const next = await rawUpgrade(stack.gateway.url, '/service-live/socket', headers);
    expect(next.status).toBe(101); // rawUpgrade closes it at once
    await eventually('no upstream WebSocket open', 5_000, () => upstream.openWebSockets === 0);
    expect(upstream.wsConnections).toHaveLength(1);
    expect(stack.gateway.logs.slice(logsBefore).filter((line) => line.includes('websocket_refused'))).toEqual([]);
  });
});
