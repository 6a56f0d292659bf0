/**
 * Answers that never finish are counted too (found by the observability red team): one the
 * gateway cut after its head because the upstream died mid-answer (`502`, as the upstream error
 * it is), and one the client abandoned while the upstream was still thinking (`499`, nginx's).
 * Both were counted nowhere: an upstream slower than its clients wait paged no one, and the
 * latency histogram never saw them.
 *
 * Mutations that fail this file (by hand, once): src/http/metrics-route.ts metering on 'finish'
 * again (`res.on('close', closed)` → `res.on('finish', closed)`) → both; src/app.ts fail()
 * without `markCut(res);` → the first (counted 499).
 */
import http from 'node:http';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { listenOnLoopback } from '../../support/listen.js';
import { startStack, type Stack } from '../../support/stack.js';
import { eventually } from '../../support/wait.js';

let stack: Stack;
let upstream: http.Server;
let cookie: string;
let arrived = 0;

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    arrived += 1;
    req.resume();
    if (req.url?.endsWith('/crash')) {
      // A head and part of the body, then the upstream dies.
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': '100000' });
      res.write(Buffer.alloc(1000, 'x'), () => setImmediate(() => res.socket?.destroy()));
    }
    // Anything else: thinks for as long as the client waits (closed with the server).
  });
  const port = await listenOnLoopback(upstream);
  stack = await startStack({ config: { routes: [{ path: '/api', target: `http://127.0.0.1:${port}`, auth: 'user' }] } });
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  cookie = `${stack.config.derived.sessionCookieName}=${client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string}`;
}, 60_000);

afterAll(async () => {
  await stack?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
});

const requests = async (status: number) =>
  Number(new RegExp(`^bff_http_requests_total\\{route="/api",method="GET",status="${status}"\\} (\\d+)$`, 'm').exec(await stack.gateway.runtime.metrics.registry.metrics())?.[1] ?? 0);

/** A GET on its own connection; resolves once its answer ends or is cut. `abortWhen` aborts it. */
function get(path: string, abortWhen?: () => boolean): Promise<void> {
  const url = new URL(stack.gateway.url);
  return new Promise((resolve) => {
    const req = http.request({ host: url.hostname, port: url.port, path, headers: { cookie, 'x-csrf': '1' }, agent: false }, (res) => {
      res.on('data', () => undefined);
      res.on('error', () => resolve());
      res.on('aborted', () => resolve());
      res.on('close', () => resolve());
    });
    req.on('error', () => resolve());
    req.end();
    if (abortWhen) void eventually('the upstream to have the call', 10_000, abortWhen).then(() => req.destroy());
  });
}

it('counts an answer the upstream died in the middle of as 502', async () => {
  const before = await requests(502);
  await get('/api/crash');
  await eventually('the cut answer counted', 10_000, async () => (await requests(502)) === before + 1);
});

it('counts a call the client abandoned while the upstream thought as 499', async () => {
  const before = await requests(499);
  const seen = arrived;
  await get('/api/slow', () => arrived > seen);
  await eventually('the abandoned call counted', 10_000, async () => (await requests(499)) === before + 1);
});
