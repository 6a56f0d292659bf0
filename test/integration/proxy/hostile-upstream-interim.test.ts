/**
 * What a hostile upstream puts around its answer, in the parts of HTTP/1.1 a header filter on the
 * final head does not see (red team: hostile upstream; these held, kept as regression tests):
 *
 * - a 103 Early Hints carrying `Set-Cookie` for the gateway's session cookie and a preload `Link`
 *   (Chromium acts on a 103's Link): no interim answer reaches the browser;
 * - trailers carrying `Set-Cookie` and `Clear-Site-Data`: none reach the browser;
 * - an endless run of 102 Processing: the route's head deadline still applies (504).
 *
 * A raw TCP upstream (Node's server cannot write these), the real gateway, provider and Redis;
 * the browser side is Node's client, which reports interim answers and trailers as received.
 *
 * The 103 and trailer cases hold because the gateway writes only the final head it built
 * (proxy/headers.ts) and no trailers: no single line of src/ keeps them, so they guard against
 * one that would relay them. The 102 case fails (checked by hand) without the head deadline
 * (src/proxy/route-agent.ts `deadlines.track(proxyReq);` removed).
 */
import http from 'node:http';
import net from 'node:net';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startStack, type Stack } from '../../support/stack.js';
import { withTimeout } from '../../support/wait.js';

let stack: Stack;
let upstream: net.Server;
let cookie: string;
const sockets = new Set<net.Socket>();

/** What the upstream writes for each request, by the request path's last segment. */
const ANSWERS: Record<string, (s: net.Socket) => void> = {
  hints(s) {
    s.write('HTTP/1.1 103 Early Hints\r\nSet-Cookie: bff=planted; Path=/\r\nLink: </evil.js>; rel=preload; as=script\r\n\r\n');
    s.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok');
  },
  trailers(s) {
    s.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: Set-Cookie, Clear-Site-Data\r\n\r\n');
    s.write('2\r\nok\r\n0\r\nSet-Cookie: bff=planted; Path=/\r\nClear-Site-Data: "*"\r\n\r\n');
  },
  processing(s) {
    const timer = setInterval(() => (s.destroyed ? clearInterval(timer) : s.write('HTTP/1.1 102 Processing\r\n\r\n')), 20);
    s.once('close', () => clearInterval(timer));
  },
};

beforeAll(async () => {
  upstream = net.createServer((s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    let head = '';
    s.on('data', (d: Buffer) => {
      head += d.toString('latin1');
      // Body-less GETs: one head per request, on a kept-alive connection.
      for (let end = head.indexOf('\r\n\r\n'); end !== -1; end = head.indexOf('\r\n\r\n')) {
        const path = head.slice(0, head.indexOf(' HTTP/')).split(' ')[1] ?? '';
        head = head.slice(end + 4);
        ANSWERS[path.slice(path.lastIndexOf('/') + 1)]?.(s);
      }
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', () => resolve()));
  const port = (upstream.address() as net.AddressInfo).port;
  stack = await startStack({ config: { routes: [{ path: '/api', target: `http://127.0.0.1:${port}`, auth: 'user', timeoutSeconds: 2 }] } });
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  const name = stack.gateway.config.derived.sessionCookieName;
  cookie = `${name}=${client.cookies(stack.gateway.url)[name] as string}`;
});

afterAll(async () => {
  await stack?.close();
  for (const s of sockets) s.destroy();
  await new Promise<void>((resolve) => upstream?.close(() => resolve()));
});

interface Seen {
  status: number;
  interim: { status: number; headers: string[] }[];
  headers: string[];
  trailers: string[];
  body: string;
}

/** A call as the SPA makes it, with every interim answer and trailer the gateway sent. */
function call(path: string): Promise<Seen> {
  const seen: Seen = { status: 0, interim: [], headers: [], trailers: [], body: '' };
  const done = new Promise<Seen>((resolve, reject) => {
    const req = http.get(`${stack.gateway.url}/api/${path}`, { headers: { 'x-csrf': '1', cookie }, agent: false }, (res) => {
      seen.status = res.statusCode ?? 0;
      seen.headers = res.rawHeaders;
      res.setEncoding('latin1');
      res.on('data', (d: string) => (seen.body += d));
      res.on('end', () => {
        seen.trailers = res.rawTrailers;
        resolve(seen);
      });
    });
    req.on('information', (info) => seen.interim.push({ status: info.statusCode, headers: info.rawHeaders }));
    req.on('error', reject);
  });
  return withTimeout(done, 15_000, `GET /api/${path}`);
}

it("passes no 103 Early Hints on: neither its Set-Cookie for the session cookie nor its preload Link", async () => {
  const seen = await call('hints');
  expect(seen.interim).toEqual([]);
  expect(seen.status).toBe(200);
  expect(seen.body).toBe('ok');
  expect(seen.headers.join('\n')).not.toMatch(/planted|evil\.js/);
});

it('passes no trailers on: neither Set-Cookie nor Clear-Site-Data', async () => {
  const seen = await call('trailers');
  expect(seen.status).toBe(200);
  expect(seen.body).toBe('ok');
  expect(seen.trailers).toEqual([]);
  expect(seen.headers.join('\n')).not.toMatch(/planted|clear-site-data/i);
});

it("answers 504 to an upstream that sends 102 Processing for ever: interim answers do not stop the head deadline", async () => {
  const started = performance.now();
  const seen = await call('processing');
  expect(seen.status).toBe(504);
  expect(seen.interim).toEqual([]);
  expect(performance.now() - started).toBeLessThan(10_000);
});
