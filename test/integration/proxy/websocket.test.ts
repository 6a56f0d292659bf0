/**
 * WebSocket upgrades at the trust boundary (SPEC §4): the same canonical path as HTTP calls, the
 * gateway's own hop-by-hop headers on the handshake, and no upstream answer but a 101 ever
 * relayed. Upgrade requests are written raw on a net.Socket: WebSocket clients normalise dot
 * segments before sending. Real provider, real Redis, real upstreams.
 */
import http from 'node:http';
import net, { type Socket } from 'node:net';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { rawExchange, rawUpgrade } from '../../support/raw-http.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';
import { withTimeout } from '../../support/wait.js';
import { openTunnel } from '../../../src/proxy/websocket-tunnel.js';

let stack: Stack;
let live: Upstream;
let cookie: string;
/** An upstream that answers every upgrade with its own error page, headers and cookie. */
let refusing: http.Server;
let refusingUrl: string;
let refusedUpgrades = 0;

beforeAll(async () => {
  live = await startUpstream({ websocket: true });
  refusing = http.createServer((_req, res) => res.writeHead(404).end());
  refusing.on('upgrade', (_req, socket: Socket) => {
    refusedUpgrades++;
    const body = 'upstream error page';
    socket.end(
      `HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nX-Upstream-Secret: s3cr3t\r\nSet-Cookie: upstream_session=1; Path=/\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
  });
  await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
  refusingUrl = `http://127.0.0.1:${(refusing.address() as { port: number }).port}`;
  stack = await startStack({
    config: {
      routes: [
        { path: '/live', target: live.url, auth: 'user', websocket: true },
        { path: '/internal', target: live.url, auth: 'user', websocket: true },
        { path: '/refusing', target: refusingUrl, auth: 'user', websocket: true },
      ],
    },
  });
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  cookie = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
});

afterAll(async () => {
  await stack?.close();
  await live?.close();
  refusing?.closeAllConnections();
  await new Promise((resolve) => refusing?.close(resolve));
});

beforeEach(() => {
  live.reset();
  refusedUpgrades = 0;
});

/** A raw upgrade request, with a valid handshake, the session cookie and the right Origin. */
const upgrade = (target: string, headers: Record<string, string> = {}) =>
  rawUpgrade(stack.gateway.url, target, { origin: stack.config.derived.publicOrigin, cookie: `${stack.config.derived.sessionCookieName}=${cookie}`, ...headers });

describe('WebSocket upgrades', () => {
  // Fails if, in http/websocket.ts upgrade, `if (!isWebSocketHandshake(req)) throw ...` is
  // removed: the tunnel made a WebSocket handshake of each, passing a body's framing headers
  // upstream and its bytes after the 101 as tunnel data. (An upgrade to another protocol never
  // gets there: see the h2c case below.)
  // Fails if, in http/server-options.ts, `shouldUpgradeCallback` is removed: Node handed the
  // request to the upgrade listener, which answered 404 off WebSocket routes and 400 on them.
  it('serves a request that asks for h2c as the HTTP/1.1 request it also is, on any path', async () => {
    const h2c = { connection: 'Upgrade, HTTP2-Settings', upgrade: 'h2c', 'http2-settings': 'AAMAAABkAAQAAP__' };
    const health = await rawExchange(stack.gateway.url, { target: '/healthz', headers: h2c });
    expect(health.status).toBe(200);
    const proxied = await rawExchange(stack.gateway.url, {
      target: '/live/echo',
      headers: { ...h2c, 'x-csrf': '1', cookie: `${stack.config.derived.sessionCookieName}=${cookie}` },
    });
    expect(proxied.status).toBe(200);
    expect(live.requests.at(-1)?.headers.upgrade).toBeUndefined();
    expect(live.wsConnections).toHaveLength(0);
  });

  // Fails if, in app.ts handleRequest, `if (req.headers.upgrade !== undefined) res.shouldKeepAlive = false;`
  // is removed: the second request was never read nor answered, and the connection hung open.
  it('closes the connection after an h2c request, so that one pipelined behind it is not left hanging', async () => {
    const { port } = new URL(stack.gateway.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString('latin1')));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => undefined);
    socket.write(
      'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n' +
        'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n',
    );
    try {
      await withTimeout(closed, 5_000, 'the connection to close');
    } finally {
      socket.destroy();
    }
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    expect(received).toMatch(/\r\nconnection: close\r\n/i);
  });

  it.each<[string, { method?: string; headers?: Record<string, string>; body?: string }]>([
    ['announces a body (Content-Length)', { body: 'GET /live/admin HTTP/1.1\r\n\r\n' }],
    ['announces a chunked body', { headers: { 'transfer-encoding': 'chunked' }, body: '5\r\nhello\r\n0\r\n\r\n' }],
    ['is a POST', { method: 'POST' }],
  ])('refuses an upgrade that %s with 400 invalid_request, upstream never contacted', async (_name, request) => {
    const res = await rawExchange(stack.gateway.url, {
      target: '/live/echo',
      method: request.method ?? 'GET',
      upgrade: true,
      headers: {
        upgrade: 'websocket',
        connection: 'Upgrade',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        'sec-websocket-version': '13',
        origin: stack.config.derived.publicOrigin,
        cookie: `${stack.config.derived.sessionCookieName}=${cookie}`,
        ...request.headers,
      },
      ...(request.body !== undefined ? { body: request.body } : {}),
    });
    expectErrorBody(res, 'invalid_request', 400);
    expect(live.wsConnections).toHaveLength(0);
  });

  it.each(['/live/../internal/keys', '/live/%2e%2e/internal/keys', '/live/.%2E/internal/keys', '/live/..;/internal/keys', '/live//internal/keys', '/live/%252e%252e/internal/keys'])(
    'refuses the traversal %s with 400 invalid_request, upstream never contacted',
    async (target) => {
      const res = await upgrade(target);
      expectErrorBody(res, 'invalid_request', 400);
      expect(res.headers.get('connection')).toBe('close');
      expect(live.wsConnections).toHaveLength(0);
      expect(live.requests).toHaveLength(0);
    },
  );

  it('upgrades on the canonical path, with only the gateway’s own connection headers and the Bearer token upstream', async () => {
    const res = await upgrade(
      '/live/%73ocket?room=%2e%2e',
      {
        connection: 'Upgrade, X-Named',
        'x-named': 'hop-only',
        'keep-alive': 'timeout=99',
        'proxy-authorization': 'Basic cHJveHk6cHJveHk=',
        'x-original-url': '/internal/keys',
      },
    );
    expect(res.status).toBe(101);
    expect(res.headers.get('upgrade')).toBe('websocket');
    expect(res.headers.get('sec-websocket-accept')).toEqual(expect.any(String));
    const seen = live.wsConnections[0];
    expect(seen?.url).toBe('/live/socket?room=%2e%2e');
    expect(seen?.headers.connection).toBe('Upgrade');
    expect(seen?.headers.upgrade).toBe('websocket');
    for (const name of ['x-named', 'keep-alive', 'proxy-authorization', 'x-original-url']) expect([name, seen?.headers[name]]).toEqual([name, undefined]);
    const tokens = await tokensOfSession(stack.gateway, cookie);
    expect(seen?.headers.authorization).toBe(`Bearer ${tokens?.accessToken}`);
  });

  it("answers an upstream's non-101 with 502 bad_gateway, never its status, headers or body", async () => {
    const res = await upgrade('/refusing/socket');
    expect(refusedUpgrades).toBe(1);
    expectErrorBody(res, 'bad_gateway', 502);
    expect(res.headers.get('connection')).toBe('close');
    expect(res.headers.get('x-upstream-secret')).toBeNull();
    expect(res.headers.get('set-cookie')).toBeNull();
    expect(res.text).not.toContain('upstream error page');
  });

  /**
   * A client that never sends its FIN (allowHalfOpen) must not keep the gateway's socket: the
   * server allows half-open sockets and an upgraded one has no timeout, so one such client per
   * request would run the gateway out of file descriptors.
   * Fails if, in http/websocket.ts refuse(), the `() => socket.destroy()` callback of socket.end is removed.
   */
  it('closes its side of a refused upgrade even when the client never sends its FIN', async () => {
    const gatewaySide = new Promise<Socket>((resolve) => stack.gateway.server.once('upgrade', (_req, socket: Socket) => resolve(socket)));
    const url = new URL(stack.gateway.url);
    const client = net.connect({ host: url.hostname, port: Number(url.port), allowHalfOpen: true });
    try {
      let answer = '';
      client.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
      const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
      client.write(
        `GET /live/socket HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: https://evil.example\r\n\r\n',
      );
      const socket = await withTimeout(gatewaySide, 5_000, 'the upgrade to reach the gateway');
      const closed = socket.destroyed ? Promise.resolve() : new Promise<void>((resolve) => socket.once('close', () => resolve()));
      await withTimeout(ended, 5_000, 'the refusal to end');
      expect(answer).toMatch(/^HTTP\/1\.1 403 /);
      expect(answer).toContain('csrf_check_failed');
      // The client still holds its half open: only the gateway can close its own socket.
      await withTimeout(closed, 3_000, "the gateway's socket to close");
      expect(live.wsConnections).toHaveLength(0);
    } finally {
      client.destroy();
    }
  });

  /**
   * A browser socket whose 'close' has been and gone (the browser left while the credential was
   * fetched) must not get an upstream WebSocket: nothing would ever close it.
   * Fails if, in proxy/websocket-tunnel.ts, `if (socket.destroyed) return Promise.reject(browserLeft());` is removed.
   */
  it('opens no upstream WebSocket for a browser socket already closed', async () => {
    const url = new URL(stack.gateway.url);
    const gone = net.connect({ host: url.hostname, port: Number(url.port) });
    await withTimeout(new Promise((resolve) => gone.once('connect', resolve)), 5_000, 'a socket to connect');
    const closed = new Promise((resolve) => gone.once('close', resolve));
    gone.destroy();
    await withTimeout(closed, 5_000, 'the socket to close');
    const req = {
      headers: { 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version': '13' },
    } as unknown as http.IncomingMessage;
    const opened = openTunnel(req, gone, Buffer.alloc(0), { target: new URL(live.url), path: '/live/socket', timeoutMs: 5_000, isGatewayCookie: () => false });
    await expect(withTimeout(opened, 5_000, 'the tunnel to settle')).rejects.toMatchObject({ code: 'bad_gateway' });
    expect(live.wsConnections).toHaveLength(0);
  });
  // Found by the observability red team: upgrades were counted nowhere, so a WebSocket route
  // whose upstream was down paged no one (BffUpstreamUnreachable and BffUpstream5xx read these
  // series). Fails if, in src/http/websocket.ts handle(), `count(...)` is not called, or the
  // upstream error is not counted.
  it('counts each upgrade under its route with its status, and an upstream that refuses it as an upstream error', async () => {
    const value = async (pattern: RegExp) => Number(pattern.exec(await stack.gateway.runtime.metrics.registry.metrics())?.[1] ?? 0);
    const switched = /^bff_http_requests_total\{route="\/live",method="GET",status="101"\} (\d+)$/m;
    const refusedAuth = /^bff_http_requests_total\{route="\/live",method="GET",status="401"\} (\d+)$/m;
    const refusedUpstream = /^bff_http_requests_total\{route="\/refusing",method="GET",status="502"\} (\d+)$/m;
    const upstreamError = /^bff_upstream_errors_total\{route="\/refusing",kind="bad_gateway"\} (\d+)$/m;
    const before = await Promise.all([switched, refusedAuth, refusedUpstream, upstreamError].map(value));
    expect((await upgrade('/live/socket')).status).toBe(101);
    expect((await rawUpgrade(stack.gateway.url, '/live/socket', { origin: stack.config.derived.publicOrigin })).status).toBe(401);
    expect((await upgrade('/refusing/socket')).status).toBe(502);
    const after = await Promise.all([switched, refusedAuth, refusedUpstream, upstreamError].map(value));
    expect(after.map((n, i) => n - (before[i] as number))).toEqual([1, 1, 1, 1]);
  });
});
