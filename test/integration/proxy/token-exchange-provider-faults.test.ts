/**
 * Token exchange (RFC 8693) against a provider that fails in ways other than a refusal, and one
 * that answers what it should not (found by the DPoP and token-exchange red team). A failing
 * exchange is remembered like a refused one (1 s, doubling to 30 s, per process, subject token
 * and request): a burst of calls costs the provider one exchange. A provider echoing the subject
 * token never gets the session's own token sent to the route's API. Real provider behind a
 * tampering front, real Redis, real upstream.
 *
 * Mutation checks (by hand, once):
 * - src/proxy/token-exchange.ts rememberRefusals: `if (err instanceof GatewayError)` →
 *   `if (err instanceof GatewayError && err.code === 'insufficient_scope')` (as it was): the four
 *   outage cases fail (10 exchanges for 10 calls).
 * - src/oidc/grants.ts exchangeToken: drop the `response.access_token === subjectToken` check:
 *   "answered with the subject token itself" fails (the session's token reached the ledger).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { isGrant, oauthError, startFrontedProvider, startProviderFront, type FrontAnswer, type ProviderFront } from '../../support/provider-front.js';
import { TOKEN_EXCHANGE } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';

const csrf = { 'x-csrf': '1' };
const API = 'https://api.example';
const LEDGER = 'https://ledger.example';
const clock = createTestClock();

let front: ProviderFront;
let provider: TestProvider;
let gw: TestGateway;
let ledger: Upstream;

beforeAll(async () => {
  ledger = await startUpstream();
  front = await startProviderFront();
  const reserved = await reserveServer();
  provider = await startFrontedProvider(front, {
    clients: [gatewayClient(reserved.url, { grant_types: ['authorization_code', 'refresh_token', TOKEN_EXCHANGE] })],
    scopes: { 'api:read': 'Read the API', 'ledger:read': 'Read the ledger' },
    resourceServers: { [API]: { scope: 'api:read' }, [LEDGER]: { scope: 'ledger:read' } },
    defaultResource: API,
  });
  const config = buildTestConfig({
    issuer: front.url,
    publicUrl: reserved.url,
    scopes: ['openid', 'profile', 'offline_access', 'api:read'],
    extraAuthParams: { resource: API },
    routes: [{ path: '/ledger', target: ledger.url, auth: 'user', tokenExchange: { audience: LEDGER, scope: 'ledger:read' } }],
  });
  gw = await startTestGateway(config, reserved, { clock });
});

afterAll(async () => {
  await gw?.close();
  await provider?.close();
  await front?.close();
  await ledger?.close();
});

beforeEach(() => {
  front.intercept(undefined);
  ledger.reset();
});

const exchangesSeen = () => front.requests.filter((r) => isGrant(r, TOKEN_EXCHANGE)).length;

async function signedIn(): Promise<{ client: BrowserClient; cookie: string }> {
  const client = new BrowserClient();
  await signIn(client, gw.url);
  return { client, cookie: client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string };
}

/** `calls` sequential browser calls of the exchange route while the provider answers every exchange with `answer`. */
async function burst(answer: FrontAnswer, calls = 10): Promise<{ statuses: number[]; exchanges: number }> {
  const { client } = await signedIn();
  front.intercept((req) => (isGrant(req, TOKEN_EXCHANGE) ? answer : undefined));
  const before = exchangesSeen();
  const statuses: number[] = [];
  for (let i = 0; i < calls; i++) statuses.push((await client.get(`${gw.url}/ledger/x`, { headers: csrf })).status);
  return { statuses, exchanges: exchangesSeen() - before };
}

describe('token exchange: a failing provider is not asked again on every browser call', () => {
  it('control: a 400 invalid_target is asked once for a burst of 10 calls (insufficient_scope backoff)', async () => {
    const { statuses, exchanges } = await burst(oauthError(400, 'invalid_target'));
    expect(statuses).toEqual(Array(10).fill(403));
    expect(exchanges).toBe(1);
    expect(ledger.requests).toHaveLength(0);
  });

  it('503 with an HTML body: one exchange request for 10 calls', async () => {
    const { statuses, exchanges } = await burst({ status: 503, headers: { 'content-type': 'text/html' }, body: '<h1>down</h1>' });
    expect(statuses).toEqual(Array(10).fill(502));
    expect(exchanges).toBe(1);
  });

  it('429 Too Many Requests with Retry-After: 60: one exchange request for 10 calls', async () => {
    const { statuses, exchanges } = await burst({ status: 429, headers: { 'retry-after': '60', 'content-type': 'text/plain' }, body: 'slow down' });
    expect(statuses).toEqual(Array(10).fill(502));
    expect(exchanges).toBe(1);
  });

  it('401 invalid_client (the gateway\'s own credentials refused): one exchange request for 10 calls', async () => {
    const { statuses, exchanges } = await burst(oauthError(401, 'invalid_client'));
    expect(statuses).toEqual(Array(10).fill(502));
    expect(exchanges).toBe(1);
  });

  it('200 that is not a token response (an HTML page of a proxy in front): one exchange request for 10 calls', async () => {
    const { statuses, exchanges } = await burst({ status: 200, headers: { 'content-type': 'text/html' }, body: '<html>login</html>' });
    expect(statuses).toEqual(Array(10).fill(502));
    expect(exchanges).toBe(1);
  });
});

const tokenAnswer = (body: Record<string, unknown>): FrontAnswer => ({
  status: 200,
  headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
  body: JSON.stringify(body),
});

describe('a token exchange answered with the subject token itself', () => {
  it("never sends the session's own access token to the exchange route's API: 502 token_refresh_failed", async () => {
    const { client, cookie } = await signedIn();
    const own = (await tokensOfSession(gw, cookie))?.accessToken as string;
    front.intercept((req) =>
      isGrant(req, TOKEN_EXCHANGE)
        ? tokenAnswer({ access_token: req.form.get('subject_token'), issued_token_type: 'urn:ietf:params:oauth:token-type:access_token', token_type: 'Bearer', expires_in: 300 })
        : undefined,
    );
    expectErrorBody(await client.get(`${gw.url}/ledger/x`, { headers: csrf }), 'token_refresh_failed', 502);
    expect(ledger.requests).toHaveLength(0);
    expect(own).toEqual(expect.any(String));
  });
});
