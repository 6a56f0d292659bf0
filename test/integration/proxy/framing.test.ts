/**
 * Message framing between the browser, the gateway and an upstream, read off the wire (raw
 * sockets, both ways): two parties reading one message's bytes differently is a desync.
 * (Found by red team; the rest of its probes, smuggling and response splitting, held.)
 *
 * Mutations that fail this file (checked by hand):
 * - src/proxy/upstream-call.ts passThrough: the `if (status === 204) dropContentLength(answer)`
 *   line removed: the 204 test.
 * - src/app.ts: `if (asksUpgrade(req)) res.shouldKeepAlive = false;` back to
 *   `if (req.headers.upgrade !== undefined) res.shouldKeepAlive = false;`: the pipelining test;
 *   the line removed: the h2c test (the connection stays open, the second request unread).
 */
import net from 'node:net';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { withTimeout } from '../../support/wait.js';

let stack: Stack;
let upstream: Upstream;
let cookieHeader: string;

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startStack({ config: { routes: [{ path: '/api', target: upstream.url, auth: 'user' }] } });
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  const name = stack.config.derived.sessionCookieName;
  cookieHeader = `${name}=${client.cookies(stack.gateway.url)[name] as string}`;
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

beforeEach(() => {
  upstream.reset();
  upstream.setHandler(undefined);
});

/** Writes `bytes` on one connection and collects what comes back until `done` holds or the gateway closes. */
async function exchange(bytes: string, done: (text: string) => boolean): Promise<string> {
  const url = new URL(stack.gateway.url);
  const socket = net.connect({ host: url.hostname, port: Number(url.port) });
  let text = '';
  const settled = new Promise<string>((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (done(text)) resolve(text);
    });
    socket.on('close', () => resolve(text));
    socket.on('error', () => resolve(text));
  });
  socket.write(bytes);
  try {
    return await withTimeout(settled, 5_000, 'the gateway to answer');
  } finally {
    socket.destroy();
  }
}

const statusLines = (text: string) => text.match(/HTTP\/1\.[01] \d{3}/g) ?? [];

/** RFC 9110 §8.6: a front proxy that framed the 204 by it took the next answer's bytes as its body. */
it("answers a 204 without the upstream's Content-Length, on a connection kept alive", async () => {
  upstream.setHandler((_req, res) => {
    res.writeHead(204, { 'content-length': '5' });
    res.end();
  });
  const host = new URL(stack.gateway.url).host;
  const text = await exchange(`DELETE /api/item HTTP/1.1\r\nHost: ${host}\r\nx-csrf: 1\r\nCookie: ${cookieHeader}\r\n\r\n`, (t) => t.includes('\r\n\r\n'));
  const head = text.slice(0, text.indexOf('\r\n\r\n'));
  expect(head).toMatch(/^HTTP\/1\.1 204 /);
  expect(head).toMatch(/\r\nconnection: keep-alive/i);
  expect(head).not.toMatch(/\r\ncontent-length:/i);
  expect(upstream.requests.map((r) => r.url)).toEqual(['/api/item']);
});

/**
 * Node's parser stops reading after a request only when its Connection names `upgrade`. One
 * with `Upgrade` alone is served as HTTP/1.1, and the request pipelined behind it is read and
 * forwarded with the session's token: its answer must reach the browser, not be dropped with
 * a connection closed after the first.
 */
it('answers a request pipelined behind one that carries Upgrade without Connection: upgrade', async () => {
  const host = new URL(stack.gateway.url).host;
  const head = `Host: ${host}\r\nx-csrf: 1\r\nCookie: ${cookieHeader}\r\n`;
  const text = await exchange(
    `POST /api/first HTTP/1.1\r\n${head}Upgrade: websocket\r\nContent-Length: 5\r\n\r\nhello` + `POST /api/second HTTP/1.1\r\n${head}Content-Length: 2\r\n\r\n{}`,
    (t) => statusLines(t).length >= 2,
  );
  expect(upstream.requests.map((r) => r.url)).toEqual(['/api/first', '/api/second']);
  expect(statusLines(text)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 200']);
});

it('still closes the connection after a request whose Connection names upgrade (h2c): nothing behind it is read', async () => {
  const host = new URL(stack.gateway.url).host;
  const head = `Host: ${host}\r\nx-csrf: 1\r\nCookie: ${cookieHeader}\r\n`;
  const text = await exchange(
    `GET /api/first HTTP/1.1\r\n${head}Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n` +
      `GET /api/second HTTP/1.1\r\n${head}\r\n`,
    () => false,
  );
  expect(statusLines(text)).toEqual(['HTTP/1.1 200']);
  expect(upstream.requests.map((r) => r.url)).toEqual(['/api/first']);
});
