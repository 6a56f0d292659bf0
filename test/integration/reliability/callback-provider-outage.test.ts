/**
 * SPEC §7: the provider failing during the callback (its token endpoint answering 5xx, or an
 * HTML page where a token response belongs; its keys not answering in time) is 503
 * provider_unavailable, like a provider down at /auth/login, not the user's 400. A refusal the
 * provider means (a 4xx OAuth error such as invalid_grant) stays 400 invalid_request.
 *
 * The browser signs in at the real provider; the tampering front at the issuer answers the code
 * exchange or the JWKS fetch itself.
 *
 * Fails if, in oidc/errors.ts fromCallbackError, `|| outage` is removed (the token endpoint
 * cases), or `|| err instanceof joseErrors.JWKSTimeout` is removed (the JWKS case).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { completeAtProvider, signIn, startLogin } from '../../support/drive-login.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { isGrant, oauthError, startFrontedProvider, startProviderFront, type FrontAnswer, type Interceptor, type ProviderFront } from '../../support/provider-front.js';
import { expectErrorBody } from '../../support/assertions.js';

const csrf = { 'x-csrf': '1' };
/** The gateway's provider timeout (oidc/client.ts createProviderHandle default), plus slack. */
const JWKS_TIMEOUT_TEST_MS = 30_000;

let front: ProviderFront;
let provider: TestProvider;
let gw: TestGateway;

beforeAll(async () => {
  front = await startProviderFront();
  const reserved = await reserveServer();
  provider = await startFrontedProvider(front, { clients: [gatewayClient(reserved.url)] });
  gw = await startTestGateway(buildTestConfig({ issuer: front.url, publicUrl: reserved.url }), reserved);
});

afterAll(async () => {
  await gw?.close();
  await provider?.close();
  await front?.close();
});

afterEach(() => front.intercept(undefined));

/** Signs in at the provider, then follows the callback with `interceptor` at the front. */
async function callbackWith(interceptor: Interceptor) {
  const client = new BrowserClient();
  const { authorizeUrl } = await startLogin(client, gw.url);
  const callbackUrl = await completeAtProvider(client, authorizeUrl);
  front.intercept(interceptor);
  // Long enough for the gateway's own provider timeout to answer first.
  const answer = await client.get(callbackUrl, { headers: { accept: 'application/json' }, timeoutMs: JWKS_TIMEOUT_TEST_MS });
  front.intercept(undefined);
  return { answer, client };
}

const tokenEndpoint = (answer: FrontAnswer): Interceptor => (req) => (isGrant(req, 'authorization_code') ? answer : undefined);
const html = (status: number): FrontAnswer => ({ status, headers: { 'content-type': 'text/html' }, body: '<html><body>Service Unavailable</body></html>' });

describe('the token endpoint fails during the callback', () => {
  it.each<[string, FrontAnswer]>([
    ['503 with an HTML page', html(503)],
    ['200 with an HTML page', html(200)],
    ['502 with a JSON error', oauthError(502, 'server_error')],
  ])('%s: 503 provider_unavailable, no session', async (_name, failure) => {
    const { answer, client } = await callbackWith(tokenEndpoint(failure));
    expectErrorBody(answer, 'provider_unavailable', 503);
    expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(401);
  });

  it.each<[string, FrontAnswer]>([
    ['400 invalid_grant', oauthError(400, 'invalid_grant', 'code expired')],
    ['400 with an HTML page', html(400)],
  ])('%s: still 400 invalid_request', async (_name, refusal) => {
    const { answer } = await callbackWith(tokenEndpoint(refusal));
    expectErrorBody(answer, 'invalid_request', 400);
  });
});

describe("the provider's keys do not answer during the callback", () => {
  it(
    '503 provider_unavailable once the JWKS fetch times out; sign-in works once they answer',
    async () => {
      // Nothing has verified an ID token yet, so the keys are fetched at this callback.
      let release!: () => void;
      const released = new Promise<FrontAnswer>((resolve) => (release = () => resolve({ status: 503 })));
      const jwksPath = new URL(gw.runtime.provider.get().metadata.jwks_uri as string).pathname;
      try {
        const { answer } = await callbackWith((req) => (req.method === 'GET' && req.path === jwksPath ? released : undefined));
        expectErrorBody(answer, 'provider_unavailable', 503);
      } finally {
        release();
      }
      const client = new BrowserClient();
      await signIn(client, gw.url);
      expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
    },
    JWKS_TIMEOUT_TEST_MS,
  );
});
