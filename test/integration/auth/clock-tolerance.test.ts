/**
 * SPEC: oidc.clockToleranceSeconds is the tolerance for the ID token's time claims, above the
 * 30 s openid-client assumes by default too. The browser signs in at the real provider; the
 * tampering front at the issuer answers the code exchange with an ID token of the test's making
 * (test/support/forged-tokens.ts), correct in everything but the one time claim changed.
 *
 * Fails if, in oidc/client.ts discover(), `metadata` is no longer passed to oidc.discovery
 * (`undefined` in its place): openid-client then refuses nbf and exp 60 s off with its own 30 s,
 * before the gateway's check with the configured 120 s is reached.
 */
import {
  changed,
  idTokenClaimsFor,
  jwksOf,
  signedWith,
  signInWithForgedIdToken,
  signingKey,
  type Claims,
  type ForgingRig,
  type SigningKey,
} from '../../support/forged-tokens.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { startFrontedProvider, startProviderFront } from '../../support/provider-front.js';
import { expectErrorBody } from '../../support/assertions.js';

const TOLERANCE = 120;

let rig: ForgingRig;
let provider: TestProvider;
let key: SigningKey;

beforeAll(async () => {
  key = await signingKey('RS256', 'forged');
  const front = await startProviderFront();
  const reserved = await reserveServer();
  provider = await startFrontedProvider(front, { clients: [gatewayClient(reserved.url)] });
  const built = buildTestConfig({ issuer: front.url, publicUrl: reserved.url });
  // buildTestConfig pins the tolerance at 5 s; nothing derived depends on it.
  const config = { ...built, oidc: { ...built.oidc, clockToleranceSeconds: TOLERANCE } };
  const gw = await startTestGateway(config, reserved);
  rig = { front, gw, jwksPath: new URL(gw.runtime.provider.get().metadata.jwks_uri as string).pathname };
});

afterAll(async () => {
  await rig?.gw.close();
  await provider?.close();
  await rig?.front.close();
});

const now = () => Math.floor(Date.now() / 1000);

function signInWith(change: () => Claims) {
  return signInWithForgedIdToken(
    rig,
    (authorizeUrl) => signedWith(key)(changed(idTokenClaimsFor(authorizeUrl, rig.front.url), change())),
    () => jwksOf(key),
  );
}

it.each<[string, () => Claims]>([
  ['nbf 60 s ahead', () => ({ nbf: now() + 60 })],
  ['exp 60 s past', () => ({ iat: now() - 120, exp: now() - 60 })],
])('an ID token with %s signs in under a tolerance of 120 s', async (_name, change) => {
  const result = await signInWith(change);
  expect(result.answer.status).toBe(302);
  expect(result.cookie).toBeDefined();
});

it.each<[string, () => Claims]>([
  ['nbf 180 s ahead', () => ({ nbf: now() + 180 })],
  ['exp 180 s past', () => ({ iat: now() - 240, exp: now() - 180 })],
])('an ID token with %s is refused under a tolerance of 120 s', async (_name, change) => {
  const result = await signInWith(change);
  expectErrorBody(result.answer, 'invalid_request', 400);
  expect(result.cookie).toBeUndefined();
});

// The provider's clock as its ID token tells it: logout tokens live minutes, so a provider far
// behind the gateway made every back-channel logout a 400 while sign-ins worked, and nothing
// said why (found by red team). Runs after the cases above: `exp 60 s past` signed in with an
// `iat` 120 s ago. Fails if auth-routes.ts no longer calls noteProviderClock (no line), or says
// it on every sign-in (`|| !maySaySkew()` dropped: two lines).
it("logs a provider clock more than 60 s off, once per 10 minutes", async () => {
  expect((await signInWith(() => ({ iat: now() - 300 }))).answer.status).toBe(302);
  const said = rig.gw.logs.filter((line) => line.includes('"event":"provider_clock_skew"')).map((line) => JSON.parse(line) as { seconds: number; level: number });
  expect(said).toHaveLength(1);
  expect(said[0]?.level).toBe(40);
  expect(said[0]?.seconds).toBeGreaterThanOrEqual(119);
  expect(said[0]?.seconds).toBeLessThanOrEqual(130);
});
