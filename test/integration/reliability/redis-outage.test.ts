/**
 * SPEC §7, Redis down or stalled: affected requests fail fast with 503
 * session_store_unavailable, /readyz says 503, the cookie is never cleared, and the gateway
 * recovers by itself once Redis is back (no restart). The gateway has its own redis-server with
 * an fsync-always append-only file, so the session survives a kill and restart on the same port
 * (the harness keeps the working directory between stop() and start()).
 */
import { BrowserClient, type BrowserResponse } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import type { TestGateway } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
/** SPEC: "within about a second"; loose, for a busy 2-core machine. */
const FAST_MS = 3_000;
const RECOVERY_BOUND_MS = 10_000;

let redis: RedisServer;
let stack: Stack;
let upstream: Upstream;
let gw: TestGateway;
let cookieName: string;
/** The browser of the current phase: each phase signs in afresh, so one phase's damage cannot hide another's. */
let client: BrowserClient;
let cookieValue: string;

beforeAll(async () => {
  redis = await startRedisServer({ extraArgs: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  upstream = await startUpstream();
  stack = await startStack({
    provider: { ttl: { AccessToken: 600 } },
    config: { redisUrl: redis.url, redis: { commandTimeoutMs: 500 }, routes: [{ path: '/api', target: upstream.url, auth: 'user' }] },
  });
  gw = stack.gateway;
  cookieName = stack.config.derived.sessionCookieName;
  await freshSignIn();
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
  await redis?.close();
});

async function freshSignIn(): Promise<void> {
  client = new BrowserClient({ timeoutMs: 8_000 });
  await signIn(client, gw.url);
  cookieValue = client.cookies(gw.url)[cookieName] as string;
  expect(cookieValue).toBeDefined();
}

async function timed(fn: () => Promise<BrowserResponse>): Promise<{ res: BrowserResponse; ms: number }> {
  const started = performance.now();
  const res = await fn();
  return { res, ms: Math.round(performance.now() - started) };
}

/** No Set-Cookie that touches the session cookie (clearing it would sign the user out). */
function expectSessionCookieUntouched(res: BrowserResponse): void {
  const touching = res.headers.getSetCookie().filter((c) => c.startsWith(`${cookieName}=`));
  expect(touching).toEqual([]);
  expect(client.cookies(gw.url)[cookieName]).toBe(cookieValue);
}

async function expectSignedIn(): Promise<void> {
  const user = await client.get(`${gw.url}/auth/user`, { headers: csrf });
  expect(user.status).toBe(200);
  const api = await client.get(`${gw.url}/api/echo`, { headers: csrf });
  expect(api.status).toBe(200);
  expect(client.cookies(gw.url)[cookieName]).toBe(cookieValue);
}

/**
 * Polls /auth/user until 200 (bounded). Returns ms until it answered 200, or undefined when it
 * never did, and every other answer seen meanwhile ("no answer" for a dropped call).
 */
async function waitUntilSignedIn(boundMs: number): Promise<{ ms: number | undefined; others: string[] }> {
  const started = performance.now();
  const others: string[] = [];
  for (;;) {
    const res = await client.get(`${gw.url}/auth/user`, { headers: csrf, timeoutMs: 3_000 }).catch(() => undefined);
    const elapsed = Math.round(performance.now() - started);
    if (res?.status === 200) return { ms: elapsed, others };
    others.push(res ? `${res.status} ${res.text.slice(0, 80)}` : 'no answer');
    // A 401 will not turn into 200: the session is gone.
    if (elapsed > boundMs || res?.status === 401) return { ms: undefined, others };
    await new Promise((r) => setTimeout(r, 100));
  }
}

function distinct(values: string[]): string[] {
  return [...new Set(values)];
}

it('serves the signed-in session normally before any outage', async () => {
  await expectSignedIn();
});

/** The same three promises hold whether Redis is stalled or gone. */
function itFailsFastWhileRedisIs(state: 'paused' | 'killed'): void {
  it('answers a proxied call with 503 session_store_unavailable within the bound, and keeps the cookie', async () => {
    upstream.reset();
    const { res, ms } = await timed(() => client.get(`${gw.url}/api/echo`, { headers: csrf }));
    console.log(`Redis ${state}: proxied call answered ${res.status} in ${ms} ms (commandTimeoutMs 500)`);
    expectErrorBody(res, 'session_store_unavailable', 503);
    expect(ms).toBeLessThan(FAST_MS);
    expect(upstream.requests).toHaveLength(0);
    expectSessionCookieUntouched(res);
  });

  it('answers GET /auth/user with 503 session_store_unavailable within the bound, and keeps the cookie', async () => {
    const { res, ms } = await timed(() => client.get(`${gw.url}/auth/user`, { headers: csrf }));
    console.log(`Redis ${state}: /auth/user answered ${res.status} in ${ms} ms`);
    expectErrorBody(res, 'session_store_unavailable', 503);
    expect(ms).toBeLessThan(FAST_MS);
    expectSessionCookieUntouched(res);
  });

  it('answers /readyz with 503 naming redis, within the bound', async () => {
    const { res, ms } = await timed(() => client.get(`${gw.url}/readyz`));
    console.log(`Redis ${state}: /readyz answered ${res.status} in ${ms} ms: ${res.text}`);
    expect(res.status).toBe(503);
    expect(ms).toBeLessThan(FAST_MS);
    expect(res.json<{ down?: unknown }>().down).toEqual(expect.arrayContaining(['redis']));
  });

  it('still answers /metrics, counting the failed Redis commands', async () => {
    const before = redisCommandErrors((await client.get(`${gw.url}/metrics`)).text);
    await client.get(`${gw.url}/api/echo`, { headers: csrf });
    const { res, ms } = await timed(() => client.get(`${gw.url}/metrics`));
    expect(res.status).toBe(200);
    expect(ms).toBeLessThan(FAST_MS);
    expect(redisCommandErrors(res.text)).toBeGreaterThan(before);
  });
}

function redisCommandErrors(metricsText: string): number {
  return redisErrors(metricsText, 'command');
}

function redisErrors(metricsText: string, kind: 'command' | 'connection'): number {
  return Number(new RegExp(`^bff_redis_errors_total\\{kind="${kind}"\\} (\\d+)$`, 'm').exec(metricsText)?.[1] ?? 0);
}

describe('Redis stalled (SIGSTOP)', () => {
  beforeAll(() => redis.pause());
  afterAll(() => redis.resume());

  itFailsFastWhileRedisIs('paused');

  it('does not pile up: ten concurrent calls all fail fast', async () => {
    const started = performance.now();
    const results = await Promise.all(
      Array.from({ length: 10 }, () => client.get(`${gw.url}/api/echo`, { headers: csrf })),
    );
    const ms = Math.round(performance.now() - started);
    console.log(`Redis paused: 10 concurrent proxied calls all answered in ${ms} ms (statuses ${[...new Set(results.map((r) => r.status))].join(',')})`);
    for (const res of results) {
      expectErrorBody(res, 'session_store_unavailable', 503);
      expectSessionCookieUntouched(res);
    }
    expect(ms).toBeLessThan(FAST_MS);
  });
});

describe('after Redis resumes', () => {
  it('serves the same cookie again without restarting the gateway', async () => {
    const { ms, others } = await waitUntilSignedIn(RECOVERY_BOUND_MS);
    console.log(`Redis resumed: /auth/user answered 200 after ${ms ?? 'never'} ms; before that: ${distinct(others).join(' | ') || 'nothing'}`);
    expect(distinct(others)).toEqual([]);
    expect(ms).toBeDefined();
    await expectSignedIn();
    const ready = await client.get(`${gw.url}/readyz`);
    expect(ready.status).toBe(200);
  });
});

describe('Redis killed, then restarted on the same port', () => {
  let killedAt = 0;
  let connectionErrorsBeforeKill = 0;
  beforeAll(async () => {
    await freshSignIn();
    await expectSignedIn();
    connectionErrorsBeforeKill = redisErrors((await client.get(`${gw.url}/metrics`)).text, 'connection');
    await redis.stop();
    killedAt = performance.now();
  });
  afterAll(async () => {
    // Whatever happened above, leave a running Redis for later tests and afterAll.
    await redis.start().catch(() => undefined);
  });

  itFailsFastWhileRedisIs('killed');

  it('counts the failed reconnects under kind="connection" (a stall counts only failed commands)', async () => {
    // ioredis learns of the kill as a closed socket, then fails to reconnect while Redis is down.
    await eventually('a connection error counted', 8_000, async () => {
      const text = (await client.get(`${gw.url}/metrics`)).text;
      return redisErrors(text, 'connection') > connectionErrorsBeforeKill;
    });
  });

  it('recovers the same session by itself once Redis is back', async () => {
    // Down for a while, so ioredis is deep in its reconnect backoff.
    const downFor = 1_500 - (performance.now() - killedAt);
    if (downFor > 0) await new Promise((r) => setTimeout(r, downFor));
    await redis.start();
    const downMs = Math.round(performance.now() - killedAt);
    const { ms, others } = await waitUntilSignedIn(RECOVERY_BOUND_MS);
    console.log(
      `Redis restarted after ${downMs} ms down: same session served again ${ms ?? 'never'} ms after PING answered; ` +
        `before that: ${distinct(others).join(' | ') || 'nothing'}`,
    );
    expect(ms).toBeDefined();
    for (const other of others) expect(other).toMatch(/^503 /);
    await expectSignedIn();
    const ready = await client.get(`${gw.url}/readyz`);
    expect(ready.status).toBe(200);
  });
});
