/**
 * OpenID Foundation "Config RP" plan (oidcc-client-config-certification-test-plan), one test per
 * module (oidcc-client-test-idtoken-sig-none is in basic-rp.test.ts), through the real gateway.
 * Table: docs/conformance.md.
 *
 * Discovery happens when the gateway starts, so each module gets its own gateway with the
 * tampering front changing the provider's metadata (or keys) from the start. The front fetches
 * the real documents from the provider through itself, marked so that it passes them on.
 *
 * Mutation checks (each applied alone in a scratch worktree, the file run, reverted):
 * - src/oidc/flows.ts startAuthorization: the URL built as `${cfg.issuer}/auth?...&client_id=...`
 *   instead of from the discovered metadata: discovery-openid-config fails (/auth, not the moved path).
 * - src/oidc/client.ts: `createJwks(new URL(metadata.jwks_uri), ...)` ->
 *   `createJwks(new URL('/jwks', metadata.issuer), ...)`: discovery-jwks-uri-keys fails.
 * - src/oidc/client.ts discover: `oidc.discovery(issuer, ...)` given the full well-known URL
 *   instead (openid-client then skips its issuer comparison): discovery-issuer-mismatch fails.
 * - src/oidc/jwks.ts refetchFor (in createJwks): `if (!mayRefetch(kid, at)) throw unknown;` ->
 *   `throw unknown;` (no refetch on an unknown kid): both signing-key-rotation tests fail.
 */
import { BrowserClient } from '../support/browser-client.js';
import { signIn } from '../support/drive-login.js';
import { expectErrorBody } from '../support/assertions.js';
import { idTokenClaimsFor, jsonAnswer, jwksOf, signedWith, signInWithForgedIdToken, signingKey, type SigningKey } from '../support/forged-tokens.js';
import type { FrontRequest, Interceptor } from '../support/provider-front.js';
import { startRig, type Rig } from './rig.js';

const csrf = { 'x-csrf': '1' };
const WELL_KNOWN = '/.well-known/openid-configuration';
/** Requests the front makes to itself for the real documents carry this, and are passed on. */
const PASS = 'x-conformance-pass';

const isGet = (req: FrontRequest, path: string) => req.method === 'GET' && req.path === path && req.headers[PASS] === undefined;

async function realDocument(frontUrl: string, path: string): Promise<Record<string, unknown>> {
  return (await (await fetch(`${frontUrl}${path}`, { headers: { [PASS]: '1' } })).json()) as Record<string, unknown>;
}

/** The metadata as the provider serves it, changed by `change`. */
function metadataChanged(frontUrl: string, change: (metadata: Record<string, unknown>) => Record<string, unknown>): Interceptor {
  return async (req) => (isGet(req, WELL_KNOWN) ? jsonAnswer(change(await realDocument(frontUrl, WELL_KNOWN))) : undefined);
}

async function expectSignedIn(rig: Rig, client: BrowserClient): Promise<void> {
  const user = await client.get(`${rig.gw.url}/auth/user`, { headers: csrf });
  expect(user.status).toBe(200);
  expect(user.json()).toMatchObject({ sub: 'alice' });
}

describe('Config RP: discovery', () => {
  it("oidcc-client-test-discovery-openid-config: the gateway reads the issuer's well-known configuration and sends the browser to the authorization_endpoint named there", async () => {
    const moved = '/moved/authorize';
    const rig = await startRig({
      interceptAtDiscovery: (front) => async (req) => {
        if (isGet(req, moved)) {
          // The moved endpoint is the provider's own, under another path.
          return { status: 302, headers: { location: `${front.url}/auth?${req.query.toString()}` } };
        }
        return metadataChanged(front.url, (m) => ({ ...m, authorization_endpoint: `${front.url}${moved}` }))(req);
      },
    });
    try {
      expect(rig.front.count('GET', WELL_KNOWN)).toBeGreaterThanOrEqual(1);
      const client = new BrowserClient();
      const result = await signIn(client, rig.gw.url);
      expect(result.authorizeUrl.pathname).toBe(moved);
      await expectSignedIn(rig, client);
    } finally {
      await rig.close();
    }
  });

  it('oidcc-client-test-discovery-jwks-uri-keys: ID tokens are checked with the keys at the jwks_uri the metadata names (a path of its own), nothing else', async () => {
    const jwksPath = `/keys-${Math.random().toString(36).slice(2, 12)}`;
    const rig = await startRig({
      interceptAtDiscovery: (front) => async (req) => {
        if (isGet(req, jwksPath)) return jsonAnswer(await realDocument(front.url, '/jwks'));
        if (isGet(req, '/jwks')) return { status: 404 };
        return metadataChanged(front.url, (m) => ({ ...m, jwks_uri: `${front.url}${jwksPath}` }))(req);
      },
    });
    try {
      const client = new BrowserClient();
      await signIn(client, rig.gw.url);
      await expectSignedIn(rig, client);
      expect(rig.front.requests.filter((r) => isGet(r, jwksPath)).length).toBe(1);
      expect(rig.front.requests.filter((r) => isGet(r, '/jwks')).length).toBe(0);
    } finally {
      await rig.close();
    }
  });

  it('oidcc-client-test-discovery-issuer-mismatch: metadata naming another issuer is refused: not ready, sign-in answers 503, the browser is never sent to the provider', async () => {
    const rig = await startRig({
      waitForProvider: false,
      interceptAtDiscovery: (front) => metadataChanged(front.url, (m) => ({ ...m, issuer: 'https://attacker.example' })),
    });
    try {
      // Discovery retries (with backoff) after a refusal: a second attempt means the first was refused.
      await rig.front.waitFor((r) => isGet(r, WELL_KNOWN), 2);
      const client = new BrowserClient();
      expect((await client.get(`${rig.gw.url}/readyz`)).status).toBe(503);
      expectErrorBody(await client.get(`${rig.gw.url}/auth/login`, { headers: { accept: 'application/json' } }), 'provider_unavailable', 503);
      expect(rig.front.count('GET', '/auth')).toBe(0);
      // Refused for the issuer, not because the document could not be read.
      const reasons = rig.gw.logs.map((l) => JSON.parse(l) as { event?: string; reason?: string }).filter((l) => l.event === 'discovery_failed');
      expect(reasons.length).toBeGreaterThanOrEqual(1);
      expect(reasons.every((l) => l.reason === 'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED')).toBe(true);
    } finally {
      await rig.close();
    }
  });
});

describe('Config RP: signing key rotation', () => {
  let first: SigningKey;
  let second: SigningKey;
  beforeAll(async () => {
    first = await signingKey('RS256', 'key-1');
    second = await signingKey('RS256', 'key-2');
  });

  it('oidcc-client-test-signing-key-rotation: after a sign-in with key-1, the provider publishes only key-2 and signs with it: the next sign-in succeeds, with one JWKS refetch', async () => {
    const rig = await startRig();
    try {
      let published = jwksOf(first);
      const jwksFetches = () => rig.front.requests.filter((r) => isGet(r, rig.jwksPath)).length;
      const one = await signInWithForgedIdToken(rig, (url) => signedWith(first)(idTokenClaimsFor(url, rig.front.url)), () => published);
      expect(one.answer.status).toBe(302);
      await expectSignedIn(rig, one.client);
      expect(jwksFetches()).toBe(1);

      published = jwksOf(second);
      const two = await signInWithForgedIdToken(rig, (url) => signedWith(second)(idTokenClaimsFor(url, rig.front.url)), () => published);
      expect(two.answer.status).toBe(302);
      await expectSignedIn(rig, two.client);
      expect(jwksFetches()).toBe(2);
    } finally {
      await rig.close();
    }
  });

  it('oidcc-client-test-signing-key-rotation-just-before-signing: the keys change between the authorization request and the ID token: sign-in succeeds', async () => {
    const rig = await startRig();
    try {
      // The gateway holds key-1 already (a first sign-in), as a running client would.
      let published = jwksOf(first);
      const warmUp = await signInWithForgedIdToken(rig, (url) => signedWith(first)(idTokenClaimsFor(url, rig.front.url)), () => published);
      expect(warmUp.answer.status).toBe(302);

      const result = await signInWithForgedIdToken(
        rig,
        (url) => {
          // At the token endpoint, right before signing: rotate to key-2.
          published = jwksOf(second);
          return signedWith(second)(idTokenClaimsFor(url, rig.front.url));
        },
        () => published,
      );
      expect(result.answer.status).toBe(302);
      await expectSignedIn(rig, result.client);
    } finally {
      await rig.close();
    }
  });
});
