/**
 * The upstream is called at the route target's host and path, as the target URL says: its Host
 * header, its base path, and a query written in the target (httpxy appends that one only when
 * given the URL itself; src/proxy/proxy-target.ts keeps the URL for such a target and hands
 * httpxy a plain copy of the fields otherwise).
 *
 * Mutation checks (each by hand, once):
 *  - src/proxy/proxy-target.ts: drop `if (target.search) return target;` → the query test fails.
 *  - src/proxy/proxy-target.ts: `pathname: target.pathname` → `pathname: '/'` → the base-path test fails.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const csrf = { 'x-csrf': '1' };
let upstream: Upstream;
let stack: Stack;

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startStack({
    config: {
      routes: [
        { path: '/plain', target: upstream.url, auth: 'none' },
        { path: '/based', target: `${upstream.url}/v2`, auth: 'none', stripPrefix: true },
        { path: '/tenant', target: `${upstream.url}/t?tenant=a`, auth: 'none', stripPrefix: true },
      ],
    },
  });
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

beforeEach(() => upstream.reset());

it("sends the target's host and port as Host, and the canonical path", async () => {
  const res = await new BrowserClient().get(`${stack.gateway.url}/plain/items?q=1`, { headers: csrf });
  expect(res.status).toBe(200);
  expect(upstream.requests[0]?.url).toBe('/plain/items?q=1');
  expect(upstream.requests[0]?.headers.host).toBe(new URL(upstream.url).host);
});

it("puts the target's base path in front", async () => {
  const res = await new BrowserClient().get(`${stack.gateway.url}/based/items`, { headers: csrf });
  expect(res.status).toBe(200);
  expect(upstream.requests[0]?.url).toBe('/v2/items');
});

it("keeps a query written in the target, before the browser's", async () => {
  const res = await new BrowserClient().get(`${stack.gateway.url}/tenant/items?q=1`, { headers: csrf });
  expect(res.status).toBe(200);
  expect(upstream.requests[0]?.url).toBe('/t/items?tenant=a&q=1');
  const bare = await new BrowserClient().get(`${stack.gateway.url}/tenant/items`, { headers: csrf });
  expect(bare.status).toBe(200);
  expect(upstream.requests[1]?.url).toBe('/t/items?tenant=a');
});
