/**
 * SPEC §7: the provider failing during the callback (its token endpoint answering 5xx, or an
 * HTML page where a token response belongs; its keys not answering in time, or answering with
 * something other than a key set) is 503 provider_unavailable, like a provider down at
 * /auth/login, not the user's 400. A refusal the provider means (a 4xx OAuth error such as
 * invalid_grant) stays 400 invalid_request.
 *
 * The browser signs in at the real provider; the tampering front at the issuer answers the code
 * exchange or the JWKS fetch itself. The keys are refetched when an ID token names a kid the
 * cached set lacks: a key rotation is the provider restarted behind the front with a new key
 * first (oidc-provider reads its keys once, at start), as in test/integration/oidc/key-rotation.
 *
 * Fails if, in oidc/errors.ts fromCallbackError, `|| outage` is removed (the token endpoint
 * cases), or `err instanceof joseErrors.JWKSTimeout ||` is removed (the JWKS timeout case), or
 * in keySetUnavailable `|| err.code === joseErrors.JOSEError.code` is removed (a JWKS answering
 * 503 or an HTML 200) or `|| err instanceof joseErrors.JWKSInvalid` (JSON that is no key set).
 * The "sign-in works once they answer" part fails if, in oidc/jwks.ts refetchFor (in
 * createJwks), the kid is remembered before the refetch succeeds (`() => remember(kid, at)`,
 * fetchSet's `.then` callback, moved back before `void fetchSet(at)`): a kid whose refetch
 * failed was then not refetched for 60 s, a 400 meanwhile.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { completeAtProvider, signIn, startLogin } from '../../support/drive-login.js';
import type { TestGateway } from '../../support/gateway.js';
import { newSigningKey, startFrontedStack, type FrontedStack } from '../../support/fronted-stack.js';
import { isGrant, oauthError, type FrontAnswer, type Interceptor, type ProviderFront } from '../../support/provider-front.js';
import { expectErrorBody } from '../../support/assertions.js';

const csrf = { 'x-csrf': '1' };
/** The gateway's provider timeout (oidc/client.ts createProviderHandle default, 10 s), plus slack. */
const JWKS_TIMEOUT_TEST_MS = 30_000;

let stack: FrontedStack;
let front: ProviderFront;
let gw: TestGateway;

beforeAll(async () => {
  stack = await startFrontedStack();
  ({ front, gw } = stack);
});

afterAll(() => stack?.close());

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
/** A token answer past 1 MiB, with a Content-Length (`declared`) or streamed chunked. */
function past1MiB(declared: boolean): FrontAnswer {
  const body = JSON.stringify({ access_token: 'big', token_type: 'Bearer', expires_in: 300, padding: 'x'.repeat(2 * 1024 * 1024) });
  const length: Record<string, string> = declared ? { 'content-length': String(Buffer.byteLength(body)) } : { 'transfer-encoding': 'chunked' };
  return { status: 200, headers: { 'content-type': 'application/json', ...length }, body };
}
const html = (status: number): FrontAnswer => ({ status, headers: { 'content-type': 'text/html' }, body: '<html><body>Service Unavailable</body></html>' });

describe('the token endpoint fails during the callback', () => {
  it.each<[string, FrontAnswer]>([
    ['503 with an HTML page', html(503)],
    ['200 with an HTML page', html(200)],
    ['502 with a JSON error', oauthError(502, 'server_error')],
    // Both fail if, in src/oidc/client.ts discover, the answers are not read through boundedFetch
    // (2 MiB read whole; the answer without an ID token is then the sign-in's 400). The first
    // declares its length (which of the wrapper's two checks refuses it is pinned by
    // test/unit/oidc/bounded-fetch.test.ts), the second streams.
    ['200 with an answer past 1 MiB', past1MiB(true)],
    ['200 with an answer past 1 MiB, streamed', past1MiB(false)],
  ])('%s: 503 provider_unavailable, no session', async (_name, failure) => {
    const { answer, client } = await callbackWith(tokenEndpoint(failure));
    expectErrorBody(answer, 'provider_unavailable', 503);
    expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(401);
  });

  // Fails if, in src/oidc/errors.ts isTimeout, `|| name === 'TimeoutError'` is removed: the
  // timeout that cut the body came as a DOMException under a parse error, not as
  // openid-client's OAUTH_TIMEOUT, and was answered as the user's 400.
  it(
    'a head at once, then a body that stalls: 503 provider_unavailable once the provider timeout cuts it',
    async () => {
      const stalling: FrontAnswer = {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ access_token: 'a'.repeat(64), token_type: 'Bearer', expires_in: 300 }),
        dripMs: 1000,
      };
      const { answer, client } = await callbackWith(tokenEndpoint(stalling));
      expectErrorBody(answer, 'provider_unavailable', 503);
      expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(401);
    },
    JWKS_TIMEOUT_TEST_MS,
  );

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

/** A new signing key first behind the front, the old ones still published. */
const rotateKey = async (kid: string) => stack.rotateTo(await newSigningKey(kid));

/** Refetches for unknown kids, all kids together, are at least 1 s apart (oidc/jwks.ts DEFAULT_REFETCH). */
const pastRefetchInterval = () => stack.clock.advance(1.1);

describe("the provider's keys answer with something other than a key set when refetched for a new kid", () => {
  it.each<[string, FrontAnswer]>([
    ['503 with an HTML page', html(503)],
    ['200 with an HTML page', html(200)],
    ['200 with JSON that is no key set', { status: 200, headers: { 'content-type': 'application/json' }, body: '{"error":"unavailable"}' }],
    // Fails if, in src/oidc/jwks.ts createJwks, jose's fetch is not boundedFetch: the 2 MiB set
    // was read whole, and its lack of the new kid made it the sign-in's 400.
    ['200 with a key set past 1 MiB', { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keys: [], padding: 'x'.repeat(2 * 1024 * 1024) }) }],
  ])('%s: 503 provider_unavailable; sign-in works once they answer', async (name, failure) => {
    // A set is cached (a sign-in verified an ID token), so only the unknown kid refetches it.
    await signIn(new BrowserClient(), gw.url);
    await rotateKey(`rotated-${name.replace(/\W+/g, '-')}`);
    pastRefetchInterval();
    const jwksPath = new URL(gw.runtime.provider.get().metadata.jwks_uri as string).pathname;
    const fetchesBefore = front.count('GET', jwksPath);
    const { answer, client } = await callbackWith((req) => (req.method === 'GET' && req.path === jwksPath ? failure : undefined));
    expectErrorBody(answer, 'provider_unavailable', 503);
    expect(front.count('GET', jwksPath)).toBe(fetchesBefore + 1);
    expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(401);

    pastRefetchInterval();
    const again = new BrowserClient();
    await signIn(again, gw.url);
    expect((await again.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
    expect(front.count('GET', jwksPath)).toBe(fetchesBefore + 2);
  });
});

// Fails if, in oidc/logout-token.ts, the line `if (isFetchFailure(err) ||
// keySetUnavailable(err)) throw new GatewayError('provider_unavailable', ...)` is removed (the
// 503 case; the reset case fails if only `isFetchFailure(err) ||` is): the logout was refused
// 400, which a provider does not retry, and the session stayed.
describe("the provider's keys do not answer when a logout token names a new key", () => {
  it.each<[string, FrontAnswer]>([
    ['answer 503', html(503)],
    ['cut the connection', { status: 0, reset: true }],
  ])('they %s: 503 provider_unavailable and the session stays; the same token ends it once they answer', async (name, failure) => {
    const client = new BrowserClient();
    await signIn(client, gw.url);
    await rotateKey(`rotated-for-logout-${name.replace(/\W+/g, '-')}`);
    pastRefetchInterval();
    const token = await stack.provider().signLogoutToken({ sub: 'alice' });
    const jwksPath = new URL(gw.runtime.provider.get().metadata.jwks_uri as string).pathname;
    const post = () => new BrowserClient().post(`${gw.url}/auth/backchannel-logout`, { form: { logout_token: token } });

    front.intercept((req) => (req.method === 'GET' && req.path === jwksPath ? failure : undefined));
    expectErrorBody(await post(), 'provider_unavailable', 503);
    expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);

    front.intercept(undefined);
    pastRefetchInterval();
    expect((await post()).status).toBe(200);
    expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(401);
  });
});
