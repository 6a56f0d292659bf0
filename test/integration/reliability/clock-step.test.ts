/**
 * The host's wall clock stepped back while the gateway runs (an NTP step, a VM restored from a
 * snapshot), found by red team: in-process waits measured on it lasted as long as the step.
 *  - A client-credentials grant the provider failed once is backed off for 1 s; after a step
 *    back of an hour, every `auth: client` call answered 502 with `Retry-After: 3596`, and the
 *    provider was never asked again.
 *  - The JWKS refetch gates: after one refetch for an unknown kid (anyone can cause one with a
 *    forged back-channel logout), a step back kept them shut: a logout signed with the
 *    provider's newly rotated key was refused (400) and the session lived on.
 * The gateway's clock is the test clock here (runtime.clock, Date.now in production).
 *
 * Mutations that fail this file (checked by hand): src/proxy/grant-backoff.ts
 * `const clock = steady(wallClock)` → `const clock = wallClock` (first test); src/oidc/jwks.ts
 * `steady(options.now ?? Date.now)` → `options.now ?? Date.now` (second test).
 */
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { jsonAnswer, signingKey } from '../../support/forged-tokens.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { BACKCHANNEL_LOGOUT_EVENT, type TestProvider } from '../../support/oidc-provider.js';
import { isGrant, oauthError, startFrontedProvider, startProviderFront, type ProviderFront } from '../../support/provider-front.js';
import { postLogoutToken, userStatus } from '../../support/session-calls.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually } from '../../support/wait.js';

const HOUR = 3600;
const clock = createTestClock();
let front: ProviderFront;
let provider: TestProvider;
let upstream: Upstream;
let gw: TestGateway;

beforeAll(async () => {
  front = await startProviderFront();
  upstream = await startUpstream();
  const reserved = await reserveServer();
  provider = await startFrontedProvider(front, { clients: [gatewayClient(reserved.url, { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] })] });
  const config = buildTestConfig({ issuer: front.url, publicUrl: reserved.url, routes: [{ path: '/service', target: upstream.url, auth: 'client' }] });
  gw = await startTestGateway(config, reserved, { clock });
});

afterAll(async () => {
  await gw?.close();
  await provider?.close();
  await front?.close();
  await upstream?.close();
});

beforeEach(() => front.intercept(undefined));

it('asks the provider again about a second after a failed client-credentials grant, though the clock stepped back an hour meanwhile', async () => {
  const grants = () => front.requests.filter((r) => isGrant(r, 'client_credentials')).length;
  front.intercept((req) => (isGrant(req, 'client_credentials') ? oauthError(503, 'temporarily_unavailable') : undefined));
  const failed = await fetch(`${gw.url}/service/x`, { headers: { 'x-csrf': '1' } });
  expect([failed.status, failed.headers.get('retry-after')]).toEqual([502, '1']);
  front.intercept(undefined);
  const before = grants();

  clock.advance(-HOUR);
  await eventually(
    'the client route served again',
    10_000,
    async () => {
      const res = await fetch(`${gw.url}/service/x`, { headers: { 'x-csrf': '1' } });
      await res.arrayBuffer();
      if (res.status === 502 && Number(res.headers.get('retry-after')) > 1) throw new Error(`backed off for ${res.headers.get('retry-after')} s`);
      return res.status === 200;
    },
    { intervalMs: 250 },
  );
  expect(grants() - before).toBe(1);
});

it("verifies a back-channel logout signed with the provider's new key after the clock stepped back", async () => {
  const browser = new BrowserClient();
  await signIn(browser, gw.url);
  expect(await userStatus(gw.url, browser)).toBe(200);

  const logoutToken = (key: Awaited<ReturnType<typeof signingKey>>) =>
    new SignJWT({ iss: front.url, aud: 'bff-test', sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'logout+jwt' })
      .setIssuedAt()
      .setExpirationTime('2m')
      .sign(key.key);
  // A kid the provider never had: one refetch through the gates, 400.
  expect((await postLogoutToken(gw.url, await logoutToken(await signingKey('RS256', 'stranger')))).status).toBe(400);

  // The clock steps back an hour (a token read then meets the gates shut, as before the step),
  // then goes on past the gates' one-second interval.
  clock.advance(-HOUR);
  expect((await postLogoutToken(gw.url, await logoutToken(await signingKey('RS256', 'stranger')))).status).toBe(400);
  clock.advance(2);

  // The provider rotates its signing key and logs the user out with the new one.
  const rotated = await signingKey('RS256', 'rotated');
  const jwksPath = new URL(gw.runtime.provider.get().metadata.jwks_uri as string).pathname;
  const published = (await (await fetch(`${front.url}${jwksPath}`)).json()) as { keys: unknown[] };
  front.intercept((req) => (req.method === 'GET' && req.path === jwksPath ? jsonAnswer({ keys: [...published.keys, rotated.jwk] }) : undefined));
  expect((await postLogoutToken(gw.url, await logoutToken(rotated))).status).toBe(200);
  expect(await userStatus(gw.url, browser)).toBe(401);
});
