/**
 * Two real gateway processes (SPEC §1 "any number of gateway processes can share one Redis",
 * §4 silent refresh): the CLI (`node dist/cli.js --config FILE`) started twice on one config,
 * same Redis, same secrets, same publicUrl (as behind a load balancer), each on its own port.
 * The in-process pairs of runtimes (proxy.test.ts, refresh-coordinator.test.ts) stay; these add
 * what only separate processes show: no shared memory, main.ts's own server and handlers.
 *
 * The children cannot take a test clock, so the provider issues short-lived access tokens
 * (AccessToken TTL 8 s, refreshSkewSeconds 0) and the test waits, bounded, until the gateway's
 * own arithmetic must call the token expired.
 *
 * Mutation checks (each done by hand once, in a throwaway worktree):
 *   - src/redis/lock.ts, tryLock: `redis.set(key, token, 'PX', ttlMs)` (no 'NX'): each process
 *     elects its own refresher, the provider sees 2 refresh_token grants, the refresh storm fails.
 *   - src/session/registry.ts, end(): drop `await records.remove(sessionDigest);`: the session
 *     logged out through process A still answers 200 on process B, the back-channel test fails.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BrowserClient } from '../../support/browser-client.js';
import { cliOidc, ensureBuilt, request, reserveCliPair, startCliPair, stopCli, type Answer, type Spawned } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { signIn } from '../../support/drive-login.js';
import { gatewayClient } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { redisUrlForTests } from '../../support/redis-server.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const ACCESS_TOKEN_TTL_SECONDS = 8;
const STORM_CALLS = 50;
/** Longest the test waits for a token to expire: its whole lifetime plus rounding slack. */
const EXPIRY_WAIT_BOUND_MS = (ACCESS_TOKEN_TTL_SECONDS + 3) * 1000;

let tmp: string;
let provider: TestProvider;
/**
 * One upstream per phase (before the wait, the storm, the logout test): no phase reuses a pooled
 * upstream connection that sat idle across a wait. The test upstream closes idle keep-alive
 * connections after 5 s (Node's default), and a reuse racing that close is a 502 bad_gateway
 * (a gateway issue of its own, reported separately), not what this file is about.
 */
let upstreams: Record<Phase, Upstream>;
type Phase = 'before' | 'storm' | 'after';
const PHASES: Phase[] = ['before', 'storm', 'after'];
let publicUrl: string;
/** The two gateway processes' ports: A (the public URL's, where the provider sends logouts) and B. */
let portA: number;
let portB: number;
let processes: Spawned[] = [];

beforeAll(async () => {
  ensureBuilt();
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-two-processes-'));
  upstreams = { before: await startUpstream(), storm: await startUpstream(), after: await startUpstream() };
  ({ portA, portB, publicUrl } = await reserveCliPair());
  provider = await startTestProvider({ clients: [gatewayClient(publicUrl)], ttl: { AccessToken: ACCESS_TOKEN_TTL_SECONDS } });
  ({ processes } = await startCliPair(tmp, { portA, portB, publicUrl }, {
    oidc: cliOidc(provider.issuer),
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `twoproc${portA}:` },
    tokens: { refreshSkewSeconds: 0 },
    routes: PHASES.map((phase) => ({ path: `/${phase}`, target: upstreams[phase].url, auth: 'user' })),
    log: { level: 'info' },
  }));
}, 200_000);

afterAll(async () => {
  // Their pipes close only once they are gone; a worker that leaves first is force-exited.
  await stopCli(processes);
  await provider?.close();
  await Promise.all(Object.values(upstreams ?? {}).map((u) => u.close()));
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const refreshGrants = () => provider.counters.grants.refresh_token ?? 0;

/** The processes' warn and error log lines: what a failed call's cause is, when one fails. */
const troubleLogged = () =>
  processes.flatMap((p, i) =>
    p
      .output()
      .split('\n')
      .filter((line) => /"level":(40|50|60)/.test(line))
      .map((line) => `${i === 0 ? 'A' : 'B'}: ${line}`),
  );

/** Signs `user` in through process A; the Cookie header a browser would then send to either process. */
async function signInThroughA(user: string): Promise<string> {
  const client = new BrowserClient();
  await signIn(client, publicUrl, { user, password: `${user}-password` });
  const cookies = Object.entries(client.cookies(publicUrl));
  expect(cookies.length).toBeGreaterThan(0);
  return cookies.map(([name, value]) => `${name}=${value}`).join('; ');
}

/** A proxied call to the phase's echo upstream, which answers with the headers it got. */
async function call(phase: Phase, port: number, cookie: string): Promise<Answer> {
  return request(port, `/${phase}/echo`, { cookie, 'x-csrf': '1' });
}

function bearerOf(answer: Answer): string | undefined {
  const seen = JSON.parse(answer.body) as { headers?: { authorization?: string } };
  return seen.headers?.authorization;
}

/**
 * The gateway stores expiresAt = floor(its now in s) + expires_in, with expires_in ≤ the TTL,
 * and calls a token expired once expiresAt ≤ now (skew 0). A token the gateway held before
 * `heldBy` (ms) therefore counts as expired from (floor(heldBy / 1000) + TTL) s on: wait for that
 * moment on the shared machine clock, polling in bounded steps.
 */
async function untilExpiredForTheGateway(heldBy: number): Promise<void> {
  const expiredAt = (Math.floor(heldBy / 1000) + ACCESS_TOKEN_TTL_SECONDS) * 1000 + 50;
  const giveUpAt = Date.now() + EXPIRY_WAIT_BOUND_MS;
  while (Date.now() < expiredAt) {
    if (Date.now() > giveUpAt) throw new Error('the access token did not expire within its lifetime');
    await new Promise((r) => setTimeout(r, Math.min(200, Math.max(10, expiredAt - Date.now()))));
  }
}

describe('two gateway processes (the CLI, twice) on one Redis', () => {
  it('a refresh storm of 50 calls over both processes makes exactly one refresh_token grant, and every call carries the same new token', async () => {
    const cookie = await signInThroughA('alice');
    // The session works on both processes, with the token issued at sign-in.
    const beforeA = await call('before', portA, cookie);
    const beforeB = await call('before', portB, cookie);
    const heldBy = Date.now();
    expect([beforeA.status, beforeB.status]).toEqual([200, 200]);
    const oldToken = bearerOf(beforeB);
    expect(oldToken).toMatch(/^Bearer \S+$/);
    expect(bearerOf(beforeA)).toBe(oldToken);

    await untilExpiredForTheGateway(heldBy);
    const grantsBefore = refreshGrants();
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: STORM_CALLS }, (_, i) => call('storm', i % 2 === 0 ? portA : portB, cookie)));
    const stormMs = Math.round(performance.now() - started);

    const grants = refreshGrants() - grantsBefore;
    const statuses = answers.map((a) => a.status);
    const tokens = new Set(upstreams.storm.requests.map((r) => r.headers.authorization));
    console.log(
      `refresh storm: ${STORM_CALLS} calls (25 per process) in ${stormMs} ms, ${grants} refresh_token grant(s) at the provider, ` +
        `statuses ${JSON.stringify(Object.fromEntries(statuses.map((s) => [s, statuses.filter((x) => x === s).length])))}, ` +
        `${tokens.size} distinct token(s) upstream`,
    );
    const failed = answers.filter((a) => a.status !== 200);
    if (failed.length > 0) console.log(`failed calls: ${failed.map((a) => `${a.status} ${a.body}`).join('; ')}\n${troubleLogged().join('\n')}`);
    expect(statuses).toEqual(Array.from({ length: STORM_CALLS }, () => 200));
    expect(grants).toBe(1);
    expect(upstreams.storm.requests).toHaveLength(STORM_CALLS);
    expect(tokens.size).toBe(1);
    const [newToken] = [...tokens];
    expect(newToken).toMatch(/^Bearer \S+$/);
    expect(newToken).not.toBe(oldToken);
    // Both processes answered from the one refreshed set, not only the one that refreshed.
    expect(new Set(answers.map(bearerOf))).toEqual(new Set([newToken]));
  }, 60_000);

  it('a back-channel logout delivered to process A ends the session on process B (401 on its next call); other sessions live', async () => {
    const bob = await signInThroughA('bob');
    const alice = await signInThroughA('alice');
    expect((await call('after', portB, bob)).status).toBe(200);

    const logout = await new BrowserClient().post(`${publicUrl}/auth/backchannel-logout`, {
      form: { logout_token: await provider.signLogoutToken({ sub: 'bob' }) },
    });
    expect(logout.status).toBe(200);

    const reachedBefore = upstreams.after.requests.length;
    const onB = await call('after', portB, bob);
    expect(onB.status).toBe(401);
    expect(JSON.parse(onB.body)).toMatchObject({ error: 'login_required' });
    expect(upstreams.after.requests).toHaveLength(reachedBefore);
    expect((await call('after', portA, bob)).status).toBe(401);
    expect((await call('after', portB, alice)).status).toBe(200);
  }, 60_000);
});
