/**
 * Token exchange (RFC 8693) per route, through the HTTP path: the dev provider's exchange grant
 * (src/dev/idp/token-exchange.ts), two gateway instances on one Redis, a real upstream.
 *
 * Mutation that fails it (checked by hand): in src/proxy/bearer.ts `routeToken`, make the
 * exchanged token's lookup miss, `if (exchanged) return exchangedToken(t, exchanged);` →
 * `if (exchanged) return undefined;`: every call exchanges again (the "one exchange for many
 * calls" and "once across two instances" tests fail, with four others).
 */
import { decodeJwt } from 'jose';
import type { Config } from '../../../src/config/load.js';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock, startTestGateway, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { startExchangeStack, TOKEN_EXCHANGE as EXCHANGE, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';
import { dumpRedis } from '../../support/redis-dump.js';
import { findSecrets } from '../../support/secrets.js';

const csrf = { 'x-csrf': '1' };
const API = 'https://api.example';
const LEDGER = 'https://ledger.example';
const clock = createTestClock();

let stack: Stack;
let provider: TestProvider;
let config: Config;
let gw: TestGateway;
let gw2: TestGateway;
let ledger: Upstream;
let orders: Upstream;

beforeAll(async () => {
  [ledger, orders] = await Promise.all([startUpstream(), startUpstream()]);
  stack = await startExchangeStack({
    clock,
    apis: { [API]: { 'api:read': 'Read the API' }, [LEDGER]: { 'ledger:read': 'Read the ledger', 'ledger:write': 'Write the ledger' } },
    scopes: ['api:read'],
    routes: [
      { path: '/ledger', target: ledger.url, auth: 'user', tokenExchange: { audience: LEDGER, scope: 'ledger:read' } },
      { path: '/nowhere', target: ledger.url, auth: 'user', tokenExchange: { audience: 'https://unknown.example' } },
      { path: '/orders', target: orders.url, auth: 'user' },
    ],
  });
  ({ provider, config, gateway: gw } = stack);
  gw2 = await startTestGateway(config, undefined, { clock });
});

afterAll(async () => {
  await gw2?.close();
  await stack?.close();
  await Promise.all([ledger?.close(), orders?.close()]);
});

beforeEach(() => {
  ledger.reset();
  orders.reset();
});

async function signedIn() {
  const client = new BrowserClient();
  await signIn(client, gw.url);
  const cookie = client.cookies(gw.url)[config.derived.sessionCookieName] as string;
  client.setCookie(gw2.url, config.derived.sessionCookieName, cookie);
  return { client, cookie };
}

const exchanges = () => provider.counters.grants[EXCHANGE] ?? 0;
const bearerOf = (u: Upstream, i = -1) => String(u.requests.at(i)?.headers.authorization ?? '').replace(/^Bearer /, '');

describe('token exchange (RFC 8693)', () => {
  it('sends the route a token exchanged for its audience and narrowed scope; other routes keep the session token', async () => {
    const { client, cookie } = await signedIn();
    const before = exchanges();
    expect((await client.get(`${gw.url}/ledger/balance`, { headers: csrf })).status).toBe(200);
    expect(exchanges() - before).toBe(1);
    const exchanged = decodeJwt(bearerOf(ledger));
    expect(exchanged).toMatchObject({ aud: LEDGER, scope: 'ledger:read', sub: 'alice' });
    expect((await client.get(`${gw.url}/orders/1`, { headers: csrf })).status).toBe(200);
    const tokens = await tokensOfSession(gw, cookie);
    expect(bearerOf(orders)).toBe(tokens?.accessToken);
    expect(decodeJwt(bearerOf(orders)).aud).toBe(API);
    expect(tokens?.exchanged?.['/ledger']?.accessToken).toBe(bearerOf(ledger));
  });

  it('caches the exchanged token in the session: the provider sees one exchange for many calls, on either instance', async () => {
    const { client } = await signedIn();
    const before = exchanges();
    for (let i = 0; i < 6; i++) {
      expect((await client.get(`${(i % 2 ? gw2 : gw).url}/ledger/x`, { headers: csrf })).status).toBe(200);
    }
    expect(exchanges() - before).toBe(1);
    expect(new Set(ledger.requests.map((r) => r.headers.authorization)).size).toBe(1);
  });

  it('exchanges once across two instances under concurrent calls', async () => {
    const { client } = await signedIn();
    const before = exchanges();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => client.get(`${(i % 2 ? gw2 : gw).url}/ledger/x`, { headers: csrf })));
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(exchanges() - before).toBe(1);
    expect(new Set(ledger.requests.map((r) => r.headers.authorization)).size).toBe(1);
  });

  it('answers 403 insufficient_scope for an audience the provider refuses (invalid_target), calls no upstream and keeps the session', async () => {
    const { client } = await signedIn();
    const failures = provider.counters.grantFailures[EXCHANGE] ?? 0;
    expectErrorBody(await client.get(`${gw.url}/nowhere/x`, { headers: csrf }), 'insufficient_scope', 403);
    expect((provider.counters.grantFailures[EXCHANGE] ?? 0) - failures).toBe(1);
    expect(ledger.requests).toHaveLength(0);
    expect((await client.get(`${gw.url}/orders/1`, { headers: csrf })).status).toBe(200);
  });

  // Fails if, in src/proxy/token-exchange.ts rememberRefusals, the refusal is not consulted
  // (`if (known) throw known.error;` removed): each call of the route
  // was one more client-authenticated exchange grant (found by red team).
  it('asks the provider again for a refused exchange only after a backoff (1 s, doubling), not on every call', async () => {
    const { client } = await signedIn();
    const failures = () => provider.counters.grantFailures[EXCHANGE] ?? 0;
    const before = failures();
    for (let i = 0; i < 5; i++) expectErrorBody(await client.get(`${gw.url}/nowhere/x`, { headers: csrf }), 'insufficient_scope', 403);
    expect(failures() - before).toBe(1);
    clock.advance(1);
    expectErrorBody(await client.get(`${gw.url}/nowhere/x`, { headers: csrf }), 'insufficient_scope', 403);
    expect(failures() - before).toBe(2);
    clock.advance(1);
    expectErrorBody(await client.get(`${gw.url}/nowhere/x`, { headers: csrf }), 'insufficient_scope', 403);
    expect(failures() - before).toBe(2);
    expect(ledger.requests).toHaveLength(0);
  });

  it('answers 403 when the provider no longer accepts the subject token (invalid_grant), without ending the session itself', async () => {
    const { client, cookie } = await signedIn();
    await provider.revokeGrantsFor('alice', 'bff-test');
    expectErrorBody(await client.get(`${gw.url}/ledger/x`, { headers: csrf }), 'insufficient_scope', 403);
    expect(ledger.requests).toHaveLength(0);
    // The session record is still there; its own grant's end shows at its next refresh.
    expect(await tokensOfSession(gw, cookie)).toBeDefined();
  });

  it('answers 502 token_refresh_failed while the provider is down, and exchanges once it is back', async () => {
    const { client } = await signedIn();
    await provider.stop();
    try {
      expectErrorBody(await client.get(`${gw.url}/ledger/x`, { headers: csrf }), 'token_refresh_failed', 502);
    } finally {
      await provider.start();
    }
    // Not asked again within the failure's backoff (1 s): answered with the failure meanwhile.
    expectErrorBody(await client.get(`${gw.url}/ledger/x`, { headers: csrf }), 'token_refresh_failed', 502);
    clock.advance(1);
    expect((await client.get(`${gw.url}/ledger/x`, { headers: csrf })).status).toBe(200);
  });

  it('never stores the exchanged token in Redis or the logs in plaintext; the exchange is logged as one', async () => {
    const { client } = await signedIn();
    await client.get(`${gw.url}/ledger/x`, { headers: csrf });
    const dump = (await dumpRedis(config.redis.url ?? '', `${config.redis.keyPrefix}*`)).join('\n');
    expect(dump.length).toBeGreaterThan(0);
    expect(findSecrets(dump, { 'the exchanged token': bearerOf(ledger) })).toEqual([]);
    expect(findSecrets([...gw.logs, ...gw2.logs].join('\n'), { 'the exchanged token': bearerOf(ledger) })).toEqual([]);
    expect(gw.logs.some((l) => l.includes('"event":"token_exchange"') && l.includes('"outcome":"success"'))).toBe(true);
  });

  // Fails if, in src/proxy/bearer.ts `userAccessToken`, `if (isRefused && !claimed)` becomes
  // `if (isRefused)`: the second round finds the first round's cooldown claim and passes the 401.
  it("renews an exchanged token the upstream refuses while the session's own token is due: refresh, then exchange, one retry", async () => {
    const skew = config.tokens.refreshSkewSeconds;
    const { client } = await signedIn();
    // Access tokens live TEST_TTL.AccessToken (60 s); renewed within `skew` (30 s) of expiry.
    // Exchanged 20 s after sign-in, the route's token outlives the session's own by 20 s ...
    clock.advance(20);
    expect((await client.get(`${gw.url}/ledger/x`, { headers: csrf })).status).toBe(200);
    const refusedToken = bearerOf(ledger);
    // ... so 11 s later the session's own is due and the route's is not: the call sends it, and
    // the upstream refuses it once.
    clock.advance(60 - skew - 20 + 1);
    let refusals = 0;
    ledger.setHandler((req, res) => {
      req.resume();
      if (String(req.headers.authorization) === `Bearer ${refusedToken}`) {
        refusals++;
        res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' }).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    const before = { exchanges: exchanges(), refreshes: provider.counters.grants.refresh_token ?? 0 };
    const res = await client.get(`${gw.url}/ledger/x`, { headers: csrf });
    expect(res.status).toBe(200);
    expect(refusals).toBe(1);
    expect(bearerOf(ledger)).not.toBe(refusedToken);
    expect(decodeJwt(bearerOf(ledger)).aud).toBe(LEDGER);
    expect({ exchanges: exchanges() - before.exchanges, refreshes: (provider.counters.grants.refresh_token ?? 0) - before.refreshes }).toEqual({ exchanges: 1, refreshes: 1 });
  });

  // Last: moves the shared test clock past every token's expiry.
  it('exchanges again after expiry, once across two instances (refreshing the session token first)', async () => {
    const { client } = await signedIn();
    expect((await client.get(`${gw.url}/ledger/x`, { headers: csrf })).status).toBe(200);
    const first = bearerOf(ledger);
    const before = exchanges();
    const refreshes = provider.counters.grants.refresh_token ?? 0;
    clock.advance(3600);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => client.get(`${(i % 2 ? gw2 : gw).url}/ledger/x`, { headers: csrf })));
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(exchanges() - before).toBe(1);
    expect((provider.counters.grants.refresh_token ?? 0) - refreshes).toBe(1);
    expect(bearerOf(ledger)).not.toBe(first);
    expect(decodeJwt(bearerOf(ledger)).aud).toBe(LEDGER);
  });
});

describe('without tokenExchange', () => {
  it('sends the session token and asks the provider for no exchange', async () => {
    const { client, cookie } = await signedIn();
    const before = exchanges();
    expect((await client.get(`${gw.url}/orders/1`, { headers: csrf })).status).toBe(200);
    expect(bearerOf(orders)).toBe((await tokensOfSession(gw, cookie))?.accessToken);
    expect(exchanges()).toBe(before);
  });
});

describe('a session whose own token lives no longer than the refresh skew', () => {
  // Fails if, in src/session/tokens.ts renewalMargin, the margin is the full skew again
  // (`return skewSeconds;`): the 10 s subject token was due from the start, every round
  // refreshed it again and the exchange never ran (502, three refreshes per call).
  it('exchanges it while in its first half of life; past it, one refresh and one exchange', async () => {
    const short = await startExchangeStack({
      clock,
      apis: { [API]: { 'api:read': 'Read the API' }, [LEDGER]: { 'ledger:read': 'Read the ledger' } },
      scopes: ['api:read'],
      routes: [{ path: '/ledger', target: ledger.url, auth: 'user', tokenExchange: { audience: LEDGER, scope: 'ledger:read' } }],
      signInTokenTtl: 10,
    });
    try {
      const client = new BrowserClient();
      await signIn(client, short.gateway.url);
      const grants = () => ({ ...short.provider.counters.grants });
      const counted = async () => {
        const before = grants();
        expect((await client.get(`${short.gateway.url}/ledger/balance`, { headers: csrf })).status).toBe(200);
        const after = grants();
        return { refreshes: (after.refresh_token ?? 0) - (before.refresh_token ?? 0), exchanges: (after[EXCHANGE] ?? 0) - (before[EXCHANGE] ?? 0) };
      };
      expect(await counted()).toEqual({ refreshes: 0, exchanges: 1 });
      // Past the exchanged token's renewal (60 s, renewed 30 s early) and the subject's expiry.
      clock.advance(40);
      expect(await counted()).toEqual({ refreshes: 1, exchanges: 1 });
    } finally {
      await short.close();
    }
  });
});
