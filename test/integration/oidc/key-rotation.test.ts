/**
 * SPEC §3 (callback): an unknown `kid` makes the gateway refetch the provider's JWKS once,
 * however recent the last fetch, so a provider key rotation never breaks sign-in; floods of
 * forged kids stay bounded. And provider metadata naming endpoints the gateway must not use is
 * refused like a foreign issuer.
 *
 * oidc-provider reads its keys once, at start: a real rotation is a restart with the new key
 * first and the old one still published. The tampering front keeps the issuer URL while the
 * provider behind it is replaced, and counts the JWKS fetches that reach the provider.
 */
import { decodeProtectedHeader, type JWK } from 'jose';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import * as calls from '../../support/session-calls.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { newSigningKey, startFrontedStack, type FrontedStack } from '../../support/fronted-stack.js';
import { startFrontedProvider, startProviderFront, type ProviderFront } from '../../support/provider-front.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';

const csrf = { 'x-csrf': '1' };
let stack: FrontedStack;
let front: ProviderFront;
let gw: TestGateway;

beforeAll(async () => {
  stack = await startFrontedStack();
  ({ front, gw } = stack);
});

afterAll(() => stack?.close());

const jwksFetches = () => front.count('GET', '/jwks');
const rotateTo = (key: JWK) => stack.rotateTo(key);

async function signedIn(): Promise<{ client: BrowserClient; kid: string | undefined }> {
  const client = new BrowserClient();
  const result = await signIn(client, gw.url, { returnTo: '/app' });
  expect(new URL(result.final.url).pathname).toBe('/app');
  expect((await client.get(`${gw.url}/auth/user`, { headers: csrf })).status).toBe(200);
  const cookie = client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string;
  const idToken = (await tokensOfSession(gw, cookie))?.idToken as string;
  return { client, kid: decodeProtectedHeader(idToken).kid };
}

describe('provider key rotation', () => {
  it('a sign-in right after the rotation succeeds, with one more JWKS fetch', async () => {
    const first = await signedIn();
    const fetchesAfterFirst = jwksFetches();
    expect(fetchesAfterFirst).toBe(1);

    await rotateTo(await newSigningKey('rotated-1'));
    const second = await signedIn();
    expect(second.kid).toBe('rotated-1');
    expect(second.kid).not.toBe(first.kid);
    expect(jwksFetches()).toBe(fetchesAfterFirst + 1);
  });

  it('keeps the JWKS fetches of a flood of forged kids bounded, and sign-in working', async () => {
    const postLogoutToken = (token: string) => calls.postLogoutToken(gw.url, token);
    const before = jwksFetches();
    // One forged kid, again and again: refetched for at most once a minute.
    for (let i = 0; i < 20; i++) {
      const token = await stack.provider().signLogoutToken({ sub: 'alice' }, { key: 'foreign', kid: 'forged-same' });
      expectErrorBody(await postLogoutToken(token), 'invalid_request', 400);
    }
    expect(jwksFetches() - before).toBeLessThanOrEqual(1);

    // A new kid each time: at most one refetch per second in all, however fast they come.
    const started = performance.now();
    const middle = jwksFetches();
    for (let i = 0; i < 30; i++) {
      const token = await stack.provider().signLogoutToken({ sub: 'alice' }, { key: 'foreign', kid: `forged-${i}` });
      expectErrorBody(await postLogoutToken(token), 'invalid_request', 400);
    }
    const elapsedSeconds = Math.floor((performance.now() - started) / 1000);
    expect(jwksFetches() - middle).toBeLessThanOrEqual(1 + elapsedSeconds);

    await signedIn();
  });
});

describe('provider metadata naming plain-http endpoints', () => {
  it('is refused: discovery keeps retrying, /readyz 503, the log names the field; accepted once the metadata is fixed', async () => {
    const metadataFront = await startProviderFront();
    const reserved = await reserveServer();
    const p = await startFrontedProvider(metadataFront, { clients: [gatewayClient(reserved.url)] });
    const discoveryPath = '/.well-known/openid-configuration';
    const metadata = (await (await fetch(`${metadataFront.url}${discoveryPath}`)).json()) as Record<string, unknown>;
    // Under an http loopback issuer only loopback http endpoints pass (the https rule is unit-tested).
    const tampered = JSON.stringify({ ...metadata, jwks_uri: 'http://keys.example.net/jwks' });
    metadataFront.intercept((req) =>
      req.path === discoveryPath ? { status: 200, headers: { 'content-type': 'application/json' }, body: tampered } : undefined,
    );
    const isDiscovery = (r: { path: string }) => r.path === discoveryPath;
    const seenBefore = metadataFront.requests.filter(isDiscovery).length;
    const gw2 = await startTestGateway(buildTestConfig({ issuer: metadataFront.url, publicUrl: reserved.url }), reserved, {
      waitForProvider: false,
    });
    try {
      // A second discovery request means the first metadata was refused.
      await metadataFront.waitFor(isDiscovery, seenBefore + 2);
      const ready = await new BrowserClient().get(`${gw2.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(ready.json()).toMatchObject({ down: ['provider'] });
      const failed = gw2.logs.map((l) => JSON.parse(l) as { event?: string; reason?: string }).find((l) => l.event === 'discovery_failed');
      expect(failed?.reason).toContain('jwks_uri');
      expect(gw2.runtime.provider.isReady()).toBe(false);

      metadataFront.intercept(undefined);
      await gw2.runtime.provider.ready();
      expect((await new BrowserClient().get(`${gw2.url}/readyz`)).status).toBe(200);
    } finally {
      await gw2.close();
      await p.close();
      await metadataFront.close();
    }
  });
});
