/**
 * A hostile upstream's step-up challenge with a body that never ends (red team: hostile upstream).
 *
 * The gateway answers an upstream 401 `insufficient_user_authentication` itself (401
 * step_up_required) and discards the upstream's answer: src/proxy/upstream.ts calls
 * `proxyRes.resume()` and answers at once. The error handler ends the browser's answer before
 * httpxy gets to tie the upstream answer to it (its `res.on('close', () => proxyRes.destroy())`
 * is only set up for an answer still open), so nothing ever stops the drain: the gateway reads
 * whatever the upstream sends, as fast as it sends it, for ever, with no browser left, no
 * deadline, and after the session has ended. Each challenge costs a pooled connection and the
 * gateway's CPU for good; the route's `maxConnections` of them is reached by as many calls.
 *
 * Real provider, real Redis, a real upstream that streams its 401's body until it is cut.
 *
 * Fails (checked by hand) without src/proxy/upstream.ts's
 * `res.once('close', () => proxyRes.destroy());` after the challenge's `proxyRes.resume()`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually } from '../../support/wait.js';

const CHUNK = Buffer.alloc(16 * 1024, 0x61);

let stack: Stack;
let upstream: Upstream;
/** The upstream's endless answers: bytes written so far, and whether the gateway has cut it. */
const answers: { written: number; closed: boolean }[] = [];

beforeAll(async () => {
  upstream = await startUpstream();
  upstream.setHandler((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    res.writeHead(401, {
      'www-authenticate': 'Bearer error="insufficient_user_authentication", acr_values="urn:example:mfa"',
      'content-type': 'text/plain',
    });
    const answer = { written: 0, closed: false };
    answers.push(answer);
    // 1.6 MB/s, for as long as the gateway reads (bounded: the test ends it by closing the upstream).
    const timer = setInterval(() => {
      if (res.writable) {
        res.write(CHUNK);
        answer.written += CHUNK.length;
      }
    }, 10);
    res.on('close', () => {
      clearInterval(timer);
      answer.closed = true;
    });
  });
  stack = await startStack({ config: { routes: [{ path: '/api', target: upstream.url, auth: 'user' }] } });
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

it("stops reading an upstream's endless step-up challenge once the browser has its 401 step_up_required", async () => {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  const res = await client.get(`${stack.gateway.url}/api/payments`, { headers: { 'x-csrf': '1' } });
  expect(res.status).toBe(401);
  expect(JSON.parse(res.text)).toMatchObject({ error: 'step_up_required' });
  const answer = answers[0] as { written: number; closed: boolean };
  // The browser has been answered: the upstream's answer is of no use to anyone any more.
  // Observed before the fix: never closed, the gateway reading ~1.6 MB/s from it (and going on
  // after a logout too).
  await eventually('the gateway to let go of the upstream answer it discarded', 5000, () => answer.closed).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; the upstream had written ${answer.written} bytes into it`);
  });
}, 30_000);
