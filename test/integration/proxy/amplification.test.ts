/**
 * An upstream that keeps answering 401 invalid_token must not turn calls into provider grants
 * (issue 13, "Amplification"): a refused token is renewed only while it is still the current
 * one, and at most once per cooldown per client-token cache key or session, on all instances
 * together; otherwise the upstream's 401 reaches the browser as it was sent. A token revoked
 * early is still renewed once and the call retried. Real provider (counting grants), real
 * Redis, real upstream servers, two gateway processes.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock, startTestGateway, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const csrf = { 'x-csrf': '1' };
// One resource per client route, so that each test has its own client-token cache key.
const RESOURCES = ['https://always.example', 'https://shared.example', 'https://revoked.example'] as const;
const clock = createTestClock();
let stack: Stack;
let provider: TestProvider;
let refusing: Upstream;
let revoking: Upstream;
let gw: TestGateway;
let gw2: TestGateway;

const REFUSAL_BODY = '{"error":"invalid_token","from":"upstream"}';

function refuse(res: ServerResponse): void {
  res.writeHead(401, {
    'www-authenticate': 'Bearer error="invalid_token", error_description="nope"',
    'content-type': 'application/json',
    'x-upstream': 'refused',
  });
  res.end(REFUSAL_BODY);
}

/** Refuses every token. */
function refuseAll(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  refuse(res);
}

/** Refuses the first token it sees (as if revoked at the provider), accepts any other. */
function refuseFirstToken(): (req: IncomingMessage, res: ServerResponse) => void {
  let revoked: string | undefined;
  return (req, res) => {
    req.resume();
    const token = String(req.headers.authorization ?? '');
    revoked ??= token;
    if (token === revoked) return refuse(res);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  };
}

const grants = (type: string) => provider.counters.grants[type] ?? 0;

beforeAll(async () => {
  [refusing, revoking] = await Promise.all([startUpstream(), startUpstream()]);
  refusing.setHandler(refuseAll);
  stack = await startStack({
    clock,
    client: { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] },
    provider: {
      scopes: { 'reports:read': 'Read reports' },
      resourceServers: Object.fromEntries(RESOURCES.map((r) => [r, { scope: 'reports:read' }])),
    },
    config: {
      routes: [
        { path: '/client-always', target: refusing.url, auth: 'client', scopes: ['reports:read'], resource: RESOURCES[0] },
        { path: '/client-shared', target: refusing.url, auth: 'client', scopes: ['reports:read'], resource: RESOURCES[1] },
        { path: '/client-revoked', target: revoking.url, auth: 'client', scopes: ['reports:read'], resource: RESOURCES[2] },
        { path: '/user-always', target: refusing.url, auth: 'user' },
        { path: '/user-revoked', target: revoking.url, auth: 'user' },
      ],
    },
  });
  ({ provider, gateway: gw } = stack);
  gw2 = await startTestGateway(stack.config, undefined, { clock });
});

afterAll(async () => {
  await gw2?.close();
  await stack?.close();
  await Promise.all([refusing, revoking].map((u) => u?.close()));
});

beforeEach(() => {
  refusing.reset();
  revoking.reset();
  revoking.setHandler(refuseFirstToken());
});

/** A signed-in browser that sends its session cookie to both processes (one site behind a balancer). */
async function signedIn(): Promise<BrowserClient> {
  const client = new BrowserClient();
  await signIn(client, gw.url);
  const name = stack.config.derived.sessionCookieName;
  client.setCookie(gw2.url, name, client.cookies(gw.url)[name] as string);
  return client;
}

/** The upstream's own 401, unchanged: status, its headers, its body. */
function expectUpstreamRefusal(res: { status: number; headers: Headers; text: string }): void {
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate')).toBe('Bearer error="invalid_token", error_description="nope"');
  expect(res.headers.get('x-upstream')).toBe('refused');
  expect(res.text).toBe(REFUSAL_BODY);
}

describe('an upstream that refuses every token', () => {
  it('costs at most one client-credentials grant beyond the first token for 10 anonymous calls', async () => {
    const before = grants('client_credentials');
    const anonymous = new BrowserClient();
    for (let i = 0; i < 10; i++) expectUpstreamRefusal(await anonymous.get(`${gw.url}/client-always/data`, { headers: csrf }));
    expect(grants('client_credentials') - before).toBeLessThanOrEqual(2);
    // One retry in all: every later call's refusal was passed through without one.
    expect(refusing.requests.length).toBeLessThanOrEqual(11);
  });

  it('costs at most one refresh for 10 calls of a signed-in session', async () => {
    const client = await signedIn();
    const before = grants('refresh_token');
    for (let i = 0; i < 10; i++) expectUpstreamRefusal(await client.get(`${gw.url}/user-always/data`, { headers: csrf }));
    expect(grants('refresh_token') - before).toBeLessThanOrEqual(1);
    expect(refusing.requests.length).toBeLessThanOrEqual(11);
  });

  it('shares the cooldown between two gateway processes on one Redis', async () => {
    const client = await signedIn();
    const anonymous = new BrowserClient();
    const [cc, rt] = [grants('client_credentials'), grants('refresh_token')];
    for (let i = 0; i < 10; i++) {
      const url = (i % 2 ? gw2 : gw).url;
      expectUpstreamRefusal(await anonymous.get(`${url}/client-shared/data`, { headers: csrf }));
      expectUpstreamRefusal(await client.get(`${url}/user-always/data`, { headers: csrf }));
    }
    expect(grants('client_credentials') - cc).toBeLessThanOrEqual(2);
    expect(grants('refresh_token') - rt).toBeLessThanOrEqual(1);
  });
});

describe('a token revoked early', () => {
  it('is replaced once on a client route and the call retried', async () => {
    const before = grants('client_credentials');
    const anonymous = new BrowserClient();
    const res = await anonymous.get(`${gw.url}/client-revoked/data`, { headers: csrf });
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ ok: true });
    expect(grants('client_credentials') - before).toBe(2);
    // The other process takes the new token from Redis: no grant, no refusal.
    expect((await anonymous.get(`${gw2.url}/client-revoked/data`, { headers: csrf })).status).toBe(200);
    expect(grants('client_credentials') - before).toBe(2);
    expect(revoking.requests).toHaveLength(3);
  });

  it('is refreshed once for a session, concurrent calls on both processes all retried with the new token', async () => {
    const client = await signedIn();
    const before = grants('refresh_token');
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => client.get(`${(i % 2 ? gw2 : gw).url}/user-revoked/data`, { headers: csrf })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(6).fill(200));
    expect(grants('refresh_token') - before).toBe(1);
    const sent = new Set(revoking.requests.map((r) => r.headers.authorization));
    expect(sent.size).toBe(2);
  });
});
