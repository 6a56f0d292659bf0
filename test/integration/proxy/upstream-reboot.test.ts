/**
 * An upstream host that restarts under the route's pooled keep-alive connections without the
 * gateway hearing a FIN (a reboot, a load balancer's backend swapped, a NAT's table flushed):
 * each idle connection is dead, and a write on one is answered with a reset (found by the
 * flapping red team). Before, each dead connection cost one call: a GET's resend drew another
 * dead one (502 with the upstream up), and every POST that drew one failed. A reset on reuse
 * now closes the route's other idle connections, and the resend goes on a new one.
 *
 * Mutation that fails this file (by hand, once): src/proxy/route-agent.ts dropIdle() closing
 * nothing (its loop removed).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startRebootingRelay, type RebootingRelay } from '../../support/rebooting-relay.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const csrf = { 'x-csrf': '1' };
const POOL = 6;
let upstream: Upstream;
let relay: RebootingRelay;
let stack: Stack;
let client: BrowserClient;

beforeAll(async () => {
  upstream = await startUpstream();
  relay = await startRebootingRelay(upstream.port);
  stack = await startStack({ config: { routes: [{ path: '/api', target: relay.url, auth: 'user', timeoutSeconds: 4 }] } });
  client = new BrowserClient({ timeoutMs: 15_000 });
  await signIn(client, stack.gateway.url);
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await relay?.close();
  await upstream?.close();
});

const get = () => client.get(`${stack.gateway.url}/api/echo`, { headers: csrf });
const post = (n: number) => client.post(`${stack.gateway.url}/api/echo`, { headers: { ...csrf, 'content-type': 'application/json' }, body: `{"n":${n}}` });

/** POOL calls held at the upstream together, so that the route's pool holds POOL connections. */
async function fillPool(): Promise<void> {
  const held: Array<() => void> = [];
  upstream.setHandler((_req, res) => {
    held.push(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    if (held.length === POOL) for (const answer of held.splice(0)) answer();
  });
  try {
    expect((await Promise.all(Array.from({ length: POOL }, get))).map((r) => r.status)).toEqual(Array(POOL).fill(200));
  } finally {
    upstream.setHandler(undefined);
  }
  expect(relay.links()).toBeGreaterThanOrEqual(POOL);
}

it('a GET on a dead pooled connection is sent again once, on a new connection, and answered', async () => {
  await fillPool();
  relay.reboot();
  upstream.reset();
  expect((await get()).status).toBe(200);
  expect(upstream.requests.map((r) => r.method)).toEqual(['GET']);
});

it('a POST that draws a dead pooled connection fails unsent (never sent twice), and costs no other call', async () => {
  await fillPool();
  relay.reboot();
  upstream.reset();
  const statuses = [(await post(1)).status, (await post(2)).status, (await post(3)).status, (await get()).status];
  // The first cannot be resent: it may have reached the application.
  expect(statuses).toEqual([502, 200, 200, 200]);
  expect(upstream.requests.map((r) => r.method)).toEqual(['POST', 'POST', 'GET']);
});
