/**
 * The embedded demo (config/default.yaml) signs in with pushed authorization requests (RFC 9126):
 * the dev provider offers PAR, the gateway's `auto` pushes, and the browser's URL carries only
 * `client_id` and `request_uri`. The dev provider still issues a refresh token for a pushed
 * request (its offline_access consent, src/dev/idp/offline-access.ts), asks that consent only
 * once per grant, and the refresh token works.
 *
 * Mutation that fails this file (checked by hand): in src/dev/idp/offline-access.ts
 * addConsentToPush, change `if (ctx.status !== 201) return;` to `return;` (oidc-provider then
 * drops offline_access from the pushed request: no refresh token). Also: in src/demo.ts,
 * `pushedAuthorizationRequests: 'off'` fails the first test. The max_age=0 test fails if
 * addConsentToPush reads the client's prompt from the posted form again
 * (`typeof body.prompt === 'string' ? body.prompt : ''`) instead of the stored push.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startDemoOnFreePorts, type RunningDemo } from '../../support/demo.js';
import { pushedSignInSecrets, tokensOfSession } from '../../support/assertions.js';
import { createTestClock, type TestGateway } from '../../support/gateway.js';
import { dumpRedis } from '../../support/redis-dump.js';
import { findSecrets } from '../../support/secrets.js';

const clock = createTestClock();
let demo: RunningDemo;
const csrf = { 'x-csrf': '1', accept: 'application/json' };

beforeAll(async () => {
  demo = await startDemoOnFreePorts({ clock: clock.now });
}, 30_000);

afterAll(async () => {
  await demo?.stop();
});

const tokensOf = (client: BrowserClient) =>
  tokensOfSession({ runtime: demo.gateway.runtime } as TestGateway, client.cookies(demo.url)[demo.config.derived.sessionCookieName] as string);
/** Whether the sign-in went through the provider's consent page (its Approve form posts to …/confirm). */
const consented = (hops: { url: string }[]) => hops.some((h) => new URL(h.url).pathname.endsWith('/confirm'));
/** Whether the user typed a password (the login form posts to …/login). */
const askedPassword = (hops: { url: string }[]) => hops.some((h) => new URL(h.url).pathname.endsWith('/login') && new URL(h.url).origin === demo.idpUrl);

describe('the demo with pushed authorization requests', () => {
  it("sends the browser to the provider with only client_id and request_uri", async () => {
    const client = new BrowserClient();
    const res = await client.get(`${demo.url}/auth/login?returnTo=%2F`);
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get('location') ?? '');
    expect(location.origin).toBe(demo.idpUrl);
    expect([...location.searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
    expect(location.searchParams.get('client_id')).toBe(demo.config.oidc.clientId);
    expect(location.searchParams.get('request_uri')).toMatch(/^urn:ietf:params:oauth:request_uri:/);
  });

  // A step-up's max_age=0 (or the SPA's own) must make the provider ask again. oidc-provider
  // stores a pushed max_age=0 as prompt=login, which the dev provider's consent amendment
  // dropped: the browser came straight back with a code, and the gateway took the old
  // auth_time for as long as its clock tolerance allowed. (Before the next test moves the
  // gateway's clock: max_age is judged on it.)
  it('asks for the password again when a pushed sign-in carries max_age=0', async () => {
    const client = new BrowserClient();
    const first = await signIn(client, demo.url, { user: 'bob', password: 'bob-password', returnTo: '/' });
    expect(askedPassword(first.hops)).toBe(true);
    const silent = await signIn(client, demo.url, { user: 'bob', password: 'bob-password', returnTo: '/' });
    expect(askedPassword(silent.hops)).toBe(false);

    const again = await signIn(client, demo.url, { user: 'bob', password: 'bob-password', returnTo: '/', loginPath: '/auth/login?max_age=0' });
    expect([...again.authorizeUrl.searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
    expect(askedPassword(again.hops)).toBe(true);
    expect(consented(again.hops)).toBe(false);
    expect(new URL(again.final.url).pathname).toBe('/');
    expect((await tokensOf(client))?.refreshToken).toBeDefined();
  });

  it('gets a refresh token through a pushed request, asks consent once per grant, and the refresh works', async () => {
    const client = new BrowserClient();
    const first = await signIn(client, demo.url, { user: 'bob', password: 'bob-password', returnTo: '/' });
    expect([...first.authorizeUrl.searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
    expect(consented(first.hops)).toBe(true);
    const tokens = await tokensOf(client);
    expect(tokens?.refreshToken).toBeDefined();

    // The refresh token works: with the gateway's clock past the access token's expiry, the
    // next call refreshes (a new access token) and still reaches the demo API. The ledger route
    // (token exchange: the session's token is refreshed first, then exchanged), because the demo
    // API judges DPoP proofs' iat on its own clock, which this test does not move.
    clock.advance((tokens?.expiresAt ?? 0) - Math.floor(clock.now() / 1000) + 1);
    const ledger = await client.get(`${demo.url}/api/ledger/balance`, { headers: csrf });
    expect(ledger.status).toBe(200);
    const refreshed = await tokensOf(client);
    expect(refreshed?.accessToken).not.toBe(tokens?.accessToken);

    // A second sign-in in the same browser (the provider's session and grant are there): no
    // consent page this time, and again a refresh token.
    const second = await signIn(client, demo.url, { user: 'bob', password: 'bob-password', returnTo: '/' });
    expect([...second.authorizeUrl.searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
    expect(consented(second.hops)).toBe(false);
    expect((await tokensOf(client))?.refreshToken).toBeDefined();
  });

  it('keeps the code, the request_uri, the tokens and the DPoP key out of Redis in plaintext', async () => {
    const client = new BrowserClient();
    const result = await signIn(client, demo.url, { user: 'alice', password: 'alice-password', returnTo: '/' });
    // (Not /api/hello: the test before moved the gateway's clock, and the demo API judges DPoP
    // proofs' iat on its own.)
    expect((await client.get(`${demo.url}/api/ledger/balance`, { headers: csrf })).status).toBe(200);
    const tokens = await tokensOf(client);
    const secrets = {
      ...pushedSignInSecrets(result, tokens),
      exchanged: tokens?.exchanged?.['/api/ledger']?.accessToken,
      dpopPrivateKey: tokens?.dpopKey?.d,
    };
    expect(Object.values(secrets).every((v) => typeof v === 'string' && v.length > 0)).toBe(true);
    const dump = (await dumpRedis(demo.config.redis.url ?? '', `${demo.config.redis.keyPrefix}*`)).join('\n');
    expect(dump.length).toBeGreaterThan(0);
    expect(findSecrets(dump, secrets)).toEqual([]);
  });
});
