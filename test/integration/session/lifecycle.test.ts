/**
 * Session lifecycle (SPEC §3, §5): back-channel logout, a user's sessions and their revocation,
 * key rotation, idle and absolute timeouts. Real provider (back-channel logout on), real Redis.
 */
import { decodeJwt } from 'jose';
import { BrowserClient } from '../../support/browser-client.js';
import { parseForms, signIn } from '../../support/drive-login.js';
import * as calls from '../../support/session-calls.js';
import {
  buildTestConfig,
  createTestClock,
  gatewayClient,
  reserveServer,
  startTestGateway,
  type TestGateway,
} from '../../support/gateway.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { startStack, type Stack } from '../../support/stack.js';
import { expectErrorBody, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { eventually } from '../../support/wait.js';
import { digest } from '../../../src/redis/keys.js';
import type { Config } from '../../../src/config/load.js';

const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
let provider: TestProvider;
let upstream: Upstream;
let config: Config;
let gw: TestGateway;

let stack: Stack;

beforeAll(async () => {
  upstream = await startUpstream();
  stack = await startStack({ config: { routes: [{ path: '/api', target: upstream.url, auth: 'user' }] }, clock });
  ({ provider, config, gateway: gw } = stack);
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

interface Browser {
  client: BrowserClient;
  cookie: string;
  userAgent: string;
}

async function browser(user = 'alice', gateway: TestGateway = gw): Promise<Browser> {
  const userAgent = `test-browser-${user}-${Math.random().toString(36).slice(2, 8)}`;
  const client = new BrowserClient({ userAgent });
  await signIn(client, gateway.url, { user, password: `${user}-password` });
  return { client, userAgent, cookie: client.cookies(gateway.url)[gateway.config.derived.sessionCookieName] as string };
}

const userStatus = async (b: Browser, gateway: TestGateway = gw) => (await b.client.get(`${gateway.url}/auth/user`, { headers: csrf })).status;

const postLogoutToken = (token: string) => calls.postLogoutToken(gw.url, token);

describe('GET and DELETE /auth/sessions', () => {
  it("lists the user's own sessions with opaque ids, and marks the current one", async () => {
    const a = await browser('alice');
    const b = await browser('alice');
    await browser('bob');
    const res = await a.client.get(`${gw.url}/auth/sessions`, { headers: csrf });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toContain('no-store');
    const list = res.json() as Array<{ id: string; createdAt: string; lastActiveAt: string; userAgent: string; current: boolean }>;
    const mine = list.filter((s) => [a, b].some((x) => s.userAgent === x.userAgent));
    expect(mine).toHaveLength(2);
    expect(mine.filter((s) => s.current)).toHaveLength(1);
    expect(mine.find((s) => s.current)?.userAgent).toBe(a.userAgent);
    for (const s of list) {
      expect(Date.parse(s.createdAt)).not.toBeNaN();
      expect(Date.parse(s.lastActiveAt)).toBeGreaterThanOrEqual(Date.parse(s.createdAt) - 1000);
      for (const cookie of [a.cookie, b.cookie]) {
        expect(cookie).not.toContain(s.id);
        expect(s.id).not.toBe(digest(sessionIdFromCookie(cookie)));
      }
    }
    expect(list.some((s) => s.userAgent?.includes('bob'))).toBe(false);
  });

  it("ends another of the user's sessions and revokes its refresh token; another user's id is unknown", async () => {
    const a = await browser('alice');
    const b = await browser('alice');
    const bob = await browser('bob');
    const bTokens = await tokensOfSession(gw, b.cookie);
    const list = (await a.client.get(`${gw.url}/auth/sessions`, { headers: csrf })).json() as Array<{ id: string; userAgent: string }>;
    const bId = list.find((s) => s.userAgent === b.userAgent)?.id as string;

    expectErrorBody(await bob.client.request('DELETE', `${gw.url}/auth/sessions/${bId}`, { headers: csrf }), 'not_found', 404);
    expect(await userStatus(b)).toBe(200);
    expectErrorBody(await a.client.request('DELETE', `${gw.url}/auth/sessions/${bId}`), 'csrf_check_failed', 403);

    const res = await a.client.request('DELETE', `${gw.url}/auth/sessions/${bId}`, { headers: csrf });
    expect(res.status).toBe(204);
    expect(await userStatus(b)).toBe(401);
    expect(await userStatus(a)).toBe(200);
    expect((await provider.introspect(bTokens?.refreshToken as string)).active).toBe(false);
    expectErrorBody(await a.client.request('DELETE', `${gw.url}/auth/sessions/${bId}`, { headers: csrf }), 'not_found', 404);
  });

  // Mutation check: registry.list reporting `lastActiveAt: clock()` (or createdAt) fails this.
  it('reports lastActiveAt from the last request (the idle TTL left), not the sign-in time', async () => {
    const a = await browser('alice');
    const key = gw.runtime.keys.session(digest(sessionIdFromCookie(a.cookie)));
    const lastActive = async () => {
      const list = (await a.client.get(`${gw.url}/auth/sessions`, { headers: csrf })).json() as Array<{ lastActiveAt: string; current: boolean }>;
      return Date.parse(list.find((s) => s.current)?.lastActiveAt ?? '');
    };
    // As if the last request was 10 minutes ago: the record has 10 minutes less to live.
    await gw.runtime.redis.pexpire(key, config.session.idleTimeoutSeconds * 1000 - 600_000);
    // The listing itself is a request that slides the TTL, so ask the registry directly first.
    const [entry] = (await gw.runtime.registry.list(config.oidc.issuer, 'alice')).filter((s) => s.digest === digest(sessionIdFromCookie(a.cookie)));
    expect(clock.now() - (entry?.lastActiveAt as number)).toBeGreaterThanOrEqual(598_000);
    expect(clock.now() - (entry?.lastActiveAt as number)).toBeLessThanOrEqual(605_000);
    // A request now makes it now.
    expect(Math.abs(clock.now() - (await lastActive()))).toBeLessThan(5_000);
  });

  it('answers 401 without a session and 404 for malformed ids', async () => {
    expectErrorBody(await new BrowserClient().get(`${gw.url}/auth/sessions`, { headers: csrf }), 'login_required', 401);
    const a = await browser('alice');
    expectErrorBody(await a.client.request('DELETE', `${gw.url}/auth/sessions/${'x'.repeat(200)}`, { headers: csrf }), 'not_found', 404);
  });

  it('drops a logged-out session from the list', async () => {
    const a = await browser('alice');
    const b = await browser('alice');
    await b.client.post(`${gw.url}/auth/logout`, { headers: csrf });
    const list = (await a.client.get(`${gw.url}/auth/sessions`, { headers: csrf })).json() as Array<{ userAgent: string }>;
    expect(list.some((s) => s.userAgent === b.userAgent)).toBe(false);
  });
});

describe('POST /auth/backchannel-logout', () => {
  it('ends exactly the session the provider logs out (RP-initiated logout at the provider sends the token)', async () => {
    const a = await browser('alice');
    const b = await browser('alice');
    const bob = await browser('bob');
    const tokens = await tokensOfSession(gw, a.cookie);
    const delivered = provider.counters.backchannelLogouts;

    // 1. Browser A signs out at the provider itself (its end-session page), not at the gateway.
    const endSession = new URL(`${provider.issuer}/session/end`);
    endSession.searchParams.set('id_token_hint', tokens?.idToken as string);
    endSession.searchParams.set('client_id', 'bff-test');
    const confirm = (await a.client.follow(await a.client.get(endSession.href))).final;
    const form = parseForms(confirm.text, confirm.url).find((f) => f.buttons.some((x) => x.value === 'yes'));
    expect(form).toBeDefined();
    await a.client.post(form?.action ?? '', { form: { ...form?.fields, logout: 'yes' } });

    // 2. The provider has POSTed a logout token to the gateway: A is gone, the others live.
    expect(provider.counters.backchannelLogouts).toBe(delivered + 1);
    expect(await userStatus(a)).toBe(401);
    expect(await userStatus(b)).toBe(200);
    expect(await userStatus(bob)).toBe(200);
  });

  it('ends every session of a user for a token naming only sub', async () => {
    const a = await browser('alice');
    const b = await browser('alice');
    const bob = await browser('bob');
    const res = await postLogoutToken(await provider.signLogoutToken({ sub: 'alice' }));
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toContain('no-store');
    expect(await userStatus(a)).toBe(401);
    expect(await userStatus(b)).toBe(401);
    expect(await userStatus(bob)).toBe(200);
  });

  it('answers 200 for a valid token that matches no session', async () => {
    expect((await postLogoutToken(await provider.signLogoutToken({ sub: 'nobody' }))).status).toBe(200);
  });

  describe('refuses bad logout tokens with 400 and ends nothing', () => {
    const now = () => Math.floor(Date.now() / 1000);
    const cases: Array<[string, () => Promise<string>]> = [
      ['a wrong aud', () => provider.signLogoutToken({ sub: 'alice', aud: 'someone-else' })],
      ['a wrong iss', () => provider.signLogoutToken({ sub: 'alice', iss: 'https://other.example' })],
      ['an expired token', () => provider.signLogoutToken({ sub: 'alice', iat: now() - 3600, exp: now() - 3000 })],
      ['an iat far in the past', () => provider.signLogoutToken({ sub: 'alice', iat: now() - 3600, exp: undefined })],
      ['a nonce', () => provider.signLogoutToken({ sub: 'alice', nonce: 'n-123' })],
      ['no events claim', () => provider.signLogoutToken({ sub: 'alice', events: undefined })],
      ['the wrong event', () => provider.signLogoutToken({ sub: 'alice', events: { 'http://example.com/other': {} } })],
      ['neither sid nor sub', () => provider.signLogoutToken({})],
      ['no jti', () => provider.signLogoutToken({ sub: 'alice', jti: undefined })],
      ['alg none', () => provider.signLogoutToken({ sub: 'alice' }, { alg: 'none' })],
      ['a foreign signing key', () => provider.signLogoutToken({ sub: 'alice' }, { key: 'foreign' })],
      ['an access-token typ', () => provider.signLogoutToken({ sub: 'alice' }, { typ: 'at+jwt' })],
      ['garbage', async () => 'not.a.jwt'],
    ];

    it.each(cases)('%s', async (_name, make) => {
      const a = await browser('alice');
      const res = await postLogoutToken(await make());
      expectErrorBody(res, 'invalid_request', 400);
      expect(await userStatus(a)).toBe(200);
    });

    // The jti is remembered for the token's life (iat + 5 min + tolerance) plus the 5 min the
    // deployment's clocks may differ: a process behind takes the token that much longer.
    // Mutation (checked by hand): session-routes.ts without `+ MAX_CLOCK_SKEW_SECONDS`.
    it('a replayed jti', async () => {
      const token = await provider.signLogoutToken({ sub: 'carol-never-signed-in' });
      expect((await postLogoutToken(token)).status).toBe(200);
      const { iss, jti } = decodeJwt(token);
      expect(await gw.runtime.redis.ttl(gw.runtime.keys.logoutJti(digest(`${iss} ${jti}`)))).toBeGreaterThan(300 + 300);
      const a = await browser('alice');
      const replay = await postLogoutToken(token);
      expectErrorBody(replay, 'invalid_request', 400);
      expect(await userStatus(a)).toBe(200);
    });

    it('a missing or repeated logout_token parameter', async () => {
      expectErrorBody(await new BrowserClient().post(`${gw.url}/auth/backchannel-logout`, { form: {} }), 'invalid_request', 400);
      const token = await provider.signLogoutToken({ sub: 'x' });
      const twice = await new BrowserClient().request('POST', `${gw.url}/auth/backchannel-logout`, {
        body: `logout_token=${token}&logout_token=${token}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expectErrorBody(twice, 'invalid_request', 400);
    });
  });
});

describe('key rotation', () => {
  it('keeps sessions sealed under the old key working after [new, old], and re-seals them with the new key on the next write', async () => {
    const a = await browser('alice');
    const d = digest(sessionIdFromCookie(a.cookie));
    const before = (await gw.runtime.records.peek(d))?.tokens.sealed as string;
    const oldKid = before.split('.')[1];

    // 1. Restart-equivalent: a gateway whose config puts a new key and a new secret first.
    const rotated = buildTestConfig({
      issuer: provider.issuer,
      publicUrl: gw.url,
      keyPrefix: config.redis.keyPrefix,
      routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
      session: {
        secrets: [randomSecret(), ...config.session.secrets],
        encryptionKeys: [randomKey(), ...config.session.encryptionKeys],
      },
    });
    const gw2 = await startTestGateway(rotated, undefined, { clock });
    try {
      a.client.setCookie(gw2.url, config.derived.sessionCookieName, a.cookie);
      // 2. The old cookie (signed with the old secret) and the old-key tokens still work.
      expect(await userStatus(a, gw2)).toBe(200);
      expect((await a.client.get(`${gw2.url}/api/echo`, { headers: csrf })).status).toBe(200);
      // 3. The next write (a refresh) seals with the new key.
      clock.advance(400);
      expect((await a.client.get(`${gw2.url}/api/echo`, { headers: csrf })).status).toBe(200);
      const after = (await gw2.runtime.records.peek(d))?.tokens.sealed as string;
      expect(after.split('.')[1]).toBe(gw2.runtime.sealer.currentKid);
      expect(after.split('.')[1]).not.toBe(oldKid);
    } finally {
      await gw2.close();
    }
  });

  // Mutation check: src/crypto/seal.ts open() throwing on an unknown key id
  // (`if (!key) throw new Error('unknown key id');`) turns this into a 503/500 and fails it.
  // The cookie is kept: to this process a removed key looks like one a newer config added (a
  // key roll under way: test/integration/session/key-roll.test.ts), whose cookie it must not
  // clear; the next sign-in replaces it.
  it('reads sessions sealed with a removed key as signed out, cleanly: 401, the cookie kept, no error logged', async () => {
    const a = await browser('alice');
    // Restart-equivalent: the old key is gone from the list (its secret is kept, so the cookie verifies).
    const removed = buildTestConfig({
      issuer: provider.issuer,
      publicUrl: gw.url,
      keyPrefix: config.redis.keyPrefix,
      routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
      session: { secrets: [...config.session.secrets], encryptionKeys: [randomKey()] },
    });
    const gw2 = await startTestGateway(removed, undefined, { clock });
    try {
      a.client.setCookie(gw2.url, config.derived.sessionCookieName, a.cookie);
      expectErrorBody(await a.client.get(`${gw2.url}/auth/user`, { headers: csrf }), 'login_required', 401);
      const call = await a.client.get(`${gw2.url}/api/echo`, { headers: csrf });
      expectErrorBody(call, 'login_required', 401);
      expect(call.headers.getSetCookie()).toEqual([]);
      expect(gw2.logs.filter((l) => /"level":(50|60)/.test(l))).toEqual([]);
    } finally {
      await gw2.close();
    }
  });
});

describe('timeouts', () => {
  it('ends a session after the idle timeout, counted from the last request', async () => {
    // The idle timeout is the Redis TTL, which runs on Redis's clock: the test waits on what
    // Redis reports (the key's remaining TTL, then its absence) rather than on sleeps.
    const IDLE_MS = 4_000;
    const reserved = await reserveServer();
    const p = await startTestProvider({ clients: [gatewayClient(reserved.url)] });
    const short = await startTestGateway(
      buildTestConfig({ issuer: p.issuer, publicUrl: reserved.url, session: { idleTimeoutSeconds: IDLE_MS / 1000, absoluteTimeoutSeconds: 3600 } }),
      reserved,
    );
    const key = (b: Browser) => short.runtime.keys.session(digest(sessionIdFromCookie(b.cookie)));
    const waitFor = (what: string, check: () => Promise<boolean>) => eventually(what, 15_000, check);
    try {
      const a = await browser('alice', short);
      const started = performance.now();
      // Activity keeps it alive past one idle period: three times, half the period goes by
      // (as Redis counts it) and a request slides it back to the full period.
      for (let i = 0; i < 3; i++) {
        await waitFor('half the idle period', async () => (await short.runtime.redis.pttl(key(a))) < IDLE_MS / 2);
        expect(await userStatus(a, short)).toBe(200);
        expect(await short.runtime.redis.pttl(key(a))).toBeGreaterThan(IDLE_MS / 2);
      }
      expect(performance.now() - started).toBeGreaterThan(IDLE_MS);
      // ...and inactivity ends it: Redis drops the record, and the cookie reads as signed out.
      await waitFor('the record to expire', async () => (await short.runtime.redis.exists(key(a))) === 0);
      expectErrorBody(await a.client.get(`${short.url}/auth/user`, { headers: csrf }), 'login_required', 401);
    } finally {
      await short.close();
      await p.close();
    }
  });

  it('ends a session at the absolute timeout, whatever the activity, and cleans its index entry', async () => {
    const reserved = await reserveServer();
    const p = await startTestProvider({ clients: [gatewayClient(reserved.url)] });
    const localClock = createTestClock();
    const short = await startTestGateway(
      buildTestConfig({ issuer: p.issuer, publicUrl: reserved.url, session: { idleTimeoutSeconds: 60, absoluteTimeoutSeconds: 120 } }),
      reserved,
      { clock: localClock },
    );
    try {
      const a = await browser('alice', short);
      const b = await browser('alice', short);
      localClock.advance(100);
      expect(await userStatus(a, short)).toBe(200);
      localClock.advance(30);
      expectErrorBody(await a.client.get(`${short.url}/auth/user`, { headers: csrf }), 'login_required', 401);
      // b is past its absolute timeout too: its listing is empty and the index entry dropped.
      expect(await short.runtime.registry.list(p.issuer, 'alice')).toEqual([]);
      expect(await userStatus(b, short)).toBe(401);
    } finally {
      await short.close();
      await p.close();
    }
  });
});
