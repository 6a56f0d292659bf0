/**
 * Provider metadata whose endpoint fields are not strings (found by the sign-in red team):
 * metadata.ts insecureEndpoints checked only string values, so a non-string endpoint passed
 * discovery. The gateway reads `jwks_uri` itself with `new URL(...)`, which stringifies an
 * array: ["http://host/jwks"] was read as "http://host/jwks", the keys fetched over cleartext
 * from a host the transport rule refuses, and a token signed by the key found there signed in.
 * A non-string end-session endpoint failed every logout with a 500 before its tokens were
 * revoked; a non-string authorization endpoint failed every login with a 500.
 *
 * Real gateway, real Redis, real oidc-provider behind the tampering front; the front rewrites
 * the discovery document only.
 *
 * Mutation check (by hand, once): src/oidc/metadata.ts insecureEndpoints, `typeof value !==
 * 'string' ||` removed from the check: all three tests fail.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { idTokenClaimsFor, jwksOf, signedWith, signInWithForgedIdToken, signingKey } from '../../support/forged-tokens.js';
import type { Interceptor, ProviderFront } from '../../support/provider-front.js';
import { startRig, type Rig } from '../../conformance/rig.js';

const DISCOVERY = '/.well-known/openid-configuration';

type Metadata = Record<string, unknown>;

/** Discovery answered with the provider's own metadata, edited. */
const rewriteMetadata =
  (edit: (m: Metadata, front: ProviderFront) => Metadata) =>
  (front: ProviderFront): Interceptor =>
  async (req) => {
    if (req.path !== DISCOVERY) return undefined;
    const own = await front.ask(req);
    const metadata = JSON.parse(own.body.toString('utf8')) as Metadata;
    return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(edit(metadata, front)) };
  };

/** Either discovery was refused (a second discovery request came) or it was accepted. */
async function discoveryOutcome(rig: Rig): Promise<'accepted' | 'refused'> {
  const refused = rig.front.waitFor((r) => r.path === DISCOVERY, 2, 15_000).then(() => 'refused' as const);
  const accepted = rig.gw.runtime.provider.ready().then(() => 'accepted' as const);
  return Promise.race([refused, accepted]);
}

describe('jwks_uri as a one-member array naming plain http to a non-loopback host', () => {
  // The string form ("http://0.0.0.0:<port>/jwks-plain") is refused by insecureEndpoints
  // (0.0.0.0 is not a loopback name: test/integration/oidc/key-rotation.test.ts covers the
  // string form). The array form is not checked, and new URL([...]) reads it as that string.
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig({
      waitForProvider: false,
      interceptAtDiscovery: rewriteMetadata((m, front) => ({ ...m, jwks_uri: [`http://0.0.0.0:${front.port}/jwks-plain`] })),
    });
  });
  afterAll(() => rig?.close());

  it('is refused at discovery like the string form, and the keys are never fetched over it', async () => {
    const outcome = await discoveryOutcome(rig);
    let plainFetches = 0;
    let signedInWithFetchedKeys = false;
    if (outcome === 'accepted') {
      // Show what accepting it means: the ID token keys come over cleartext http from a host
      // the transport rule does not allow, and a token signed by the key found there signs in.
      rig.front.intercept(undefined);
      const attacker = await signingKey('RS256', 'attacker');
      const result = await signInWithForgedIdToken(
        rig,
        (url) => signedWith(attacker)(idTokenClaimsFor(url, rig.front.url)),
        () => jwksOf(attacker),
      );
      plainFetches = rig.front.count('GET', '/jwks-plain');
      signedInWithFetchedKeys = result.answer.status === 302 && result.cookie !== undefined;
    }
    expect({ outcome, plainFetches, signedInWithFetchedKeys }).toEqual({ outcome: 'refused', plainFetches: 0, signedInWithFetchedKeys: false });
  });
});

describe('end_session_endpoint that is not a string', () => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig({
      waitForProvider: false,
      interceptAtDiscovery: rewriteMetadata((m) => ({ ...m, end_session_endpoint: { href: m.end_session_endpoint } })),
    });
  });
  afterAll(() => rig?.close());

  it('is refused at discovery (503 at /auth/login), never a logout that answers 500 and skips the revocation', async () => {
    const outcome = await discoveryOutcome(rig);
    const login = await new BrowserClient().get(`${rig.gw.url}/auth/login`, { headers: { accept: 'application/json' } });
    expect({ outcome, status: login.status }).toEqual({ outcome: 'refused', status: 503 });
  });
});

describe('authorization_endpoint that is not a string', () => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig({
      waitForProvider: false,
      interceptAtDiscovery: rewriteMetadata((m) => ({ ...m, authorization_endpoint: [m.authorization_endpoint] })),
    });
  });
  afterAll(() => rig?.close());

  it('is refused at discovery (503 at /auth/login), not a 500 server_error at every login', async () => {
    const outcome = await discoveryOutcome(rig);
    const login = await new BrowserClient().get(`${rig.gw.url}/auth/login`, { headers: { accept: 'application/json' } });
    expect({ outcome, status: login.status }).toEqual({ outcome: 'refused', status: 503 });
  });
});
