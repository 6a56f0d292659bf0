/**
 * A provider's OAuth error answer whose `error` member echoes what it was sent (found by red
 * team). RFC 6749 §5.2 lets `error` be any printable text, and providers in the wild put
 * sentences there ("invalid_grant: refresh token X is not active"). The gateway kept
 * `error_description` out of its logs but copied `error` into the `reason` of its log lines at
 * info and warn: the refresh token (token_refresh), the revoked token (revocation_failed), the
 * authorization code and PKCE verifier (login_failed) and the client secret
 * (client_credentials_failed) reached the log. Only the leading code word is logged now.
 *
 * Mutation that fails every case (checked by hand): src/oidc/errors.ts describeProviderError,
 * `${oauthErrorCode(err.error) ?? NONSTANDARD}` → `${err.error}`.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { isGrant, startFrontedProvider, startProviderFront, type FrontAnswer, type ProviderFront } from '../../support/provider-front.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { tokensOfSession } from '../../support/assertions.js';
import { findSecrets } from '../../support/secrets.js';
import { eventually } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
const CLIENT_SECRET = 'bff-test-secret-0123456789abcdef';
const clock = createTestClock();
let front: ProviderFront;
let provider: TestProvider;
let upstream: Upstream;
let gw: TestGateway;

/** An OAuth error answer whose `error` sentence quotes `what`. */
const echoing = (status: number, what: string): FrontAnswer => ({
  status,
  headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
  body: JSON.stringify({ error: `invalid_grant: ${what} is not active` }),
});

const basicSecret = (authorization: string | undefined): string => {
  const decoded = Buffer.from((authorization ?? '').replace(/^Basic /, ''), 'base64').toString('utf8');
  return decodeURIComponent(decoded.slice(decoded.indexOf(':') + 1));
};

beforeAll(async () => {
  front = await startProviderFront();
  upstream = await startUpstream();
  const reserved = await reserveServer();
  provider = await startFrontedProvider(front, {
    clients: [gatewayClient(reserved.url, { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] })],
    ttl: { AccessToken: 60 },
  });
  const config = buildTestConfig({
    issuer: front.url,
    publicUrl: reserved.url,
    clientSecret: CLIENT_SECRET,
    logLevel: 'info',
    routes: [
      { path: '/api', target: upstream.url, auth: 'user' },
      { path: '/service', target: upstream.url, auth: 'client' },
    ],
  });
  gw = await startTestGateway(config, reserved, { clock });
});

afterAll(async () => {
  await gw?.close();
  await provider?.close();
  await front?.close();
  await upstream?.close();
});

beforeEach(() => front.intercept(undefined));

/** The names of the secrets found in the log; each line found is shown with the values masked. */
const leaked = (secrets: Record<string, string | undefined>): string[] => {
  const found = gw.logs.flatMap((line) => {
    const names = findSecrets(line, secrets);
    if (names.length > 0) {
      let masked = line.trim();
      for (const [name, value] of Object.entries(secrets)) if (value) masked = masked.split(value).join(`<${name}>`);
      console.log(`leaking log line: ${masked}`);
    }
    return names;
  });
  return [...new Set(found)];
};

it('a refresh refused with an `error` that quotes the refresh token: the token is not logged', async () => {
  const client = new BrowserClient();
  await signIn(client, gw.url);
  const tokens = await tokensOfSession(gw, client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string);
  expect(tokens?.refreshToken).toEqual(expect.any(String));
  front.intercept((req) => (isGrant(req, 'refresh_token') ? echoing(400, `refresh token ${req.form.get('refresh_token')}`) : undefined));
  clock.advance(120);
  expect((await client.get(`${gw.url}/api/echo`, { headers: csrf })).status).toBe(401);
  expect(leaked({ 'refresh token': tokens?.refreshToken })).toEqual([]);
});

it('a revocation refused with an `error` that quotes the token: the token is not logged', async () => {
  const client = new BrowserClient();
  await signIn(client, gw.url);
  const tokens = await tokensOfSession(gw, client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string);
  const revocations = () => front.requests.filter((r) => r.path.includes('revocation') || r.path.includes('revoke')).length;
  const before = revocations();
  front.intercept((req) => (req.path.includes('revocation') || req.path.includes('revoke') ? echoing(400, `token ${req.form.get('token')}`) : undefined));
  expect((await client.post(`${gw.url}/auth/logout`, { headers: csrf })).status).toBe(200);
  await eventually('both revocations answered and logged', 5000, () =>
    revocations() - before >= 2 && gw.logs.filter((l) => l.includes('revocation_failed')).length >= 2 ? true : undefined,
  );
  expect(leaked({ 'refresh token': tokens?.refreshToken, 'access token': tokens?.accessToken })).toEqual([]);
});

it('a code exchange refused with an `error` that quotes the code and verifier: neither is logged', async () => {
  const seen: { code?: string; verifier?: string } = {};
  front.intercept((req) => {
    if (!isGrant(req, 'authorization_code')) return undefined;
    seen.code = req.form.get('code') ?? undefined;
    seen.verifier = req.form.get('code_verifier') ?? undefined;
    return echoing(400, `code ${seen.code} with verifier ${seen.verifier}`);
  });
  const { final } = await signIn(new BrowserClient(), gw.url);
  expect(final.status).toBe(400);
  expect(seen.code).toEqual(expect.any(String));
  expect(leaked({ 'authorization code': seen.code, 'PKCE verifier': seen.verifier })).toEqual([]);
});

it('a client-credentials grant refused with an `error` that quotes the client secret: the secret is not logged', async () => {
  front.intercept((req) =>
    isGrant(req, 'client_credentials')
      ? { status: 401, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: `invalid_client: secret ${basicSecret(req.headers.authorization)} does not match` }) }
      : undefined,
  );
  expect((await new BrowserClient().get(`${gw.url}/service/echo`, { headers: csrf })).status).toBe(502);
  expect(front.requests.some((r) => isGrant(r, 'client_credentials'))).toBe(true);
  expect(leaked({ 'client secret': CLIENT_SECRET })).toEqual([]);
});
