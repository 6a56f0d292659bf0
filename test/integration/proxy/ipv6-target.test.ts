/**
 * A route whose target is an IPv6 literal (`http://[::1]:port`) reaches its upstream. The
 * proxy is called with the route's target computed once (src/proxy/proxy-target.ts proxyTarget),
 * not through http-proxy-middleware's per-call middleware, which is where the bracketed host
 * used to be made a bare address; without that, the address is looked up in DNS and fails.
 *
 * Mutation check: make `proxyTarget` in src/proxy/proxy-target.ts return `target` unchanged → both
 * tests get 502 bad_gateway.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const csrf = { 'x-csrf': '1' };
let upstream: Upstream;
let stack: Stack;

beforeAll(async () => {
  upstream = await startUpstream({ host: '::1' });
  stack = await startStack({
    config: {
      routes: [
        { path: '/v6', target: upstream.url, auth: 'none' },
        { path: '/v6-base', target: `${upstream.url}/base`, auth: 'none', stripPrefix: true },
      ],
    },
  });
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

beforeEach(() => upstream.reset());

it('proxies to an upstream at a bracketed IPv6 literal, with its Host and the canonical path', async () => {
  const res = await new BrowserClient().get(`${stack.gateway.url}/v6/items?q=1`, { headers: csrf });
  expect(res.status).toBe(200);
  expect(upstream.requests).toHaveLength(1);
  expect(upstream.requests[0]?.url).toBe('/v6/items?q=1');
  expect(upstream.requests[0]?.headers.host).toBe(`[::1]:${upstream.port}`);
});

it('keeps the target base path of an IPv6 route', async () => {
  const res = await new BrowserClient().get(`${stack.gateway.url}/v6-base/items`, { headers: csrf });
  expect(res.status).toBe(200);
  expect(upstream.requests[0]?.url).toBe('/base/items');
});
