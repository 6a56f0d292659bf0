/**
 * OpenID Foundation "Basic RP" plan (oidcc-client-basic-certification-test-plan, response_type
 * code, client_secret_basic), one test per module, through the real callback. Table:
 * docs/conformance.md.
 *
 * The browser signs in at the real oidc-provider; the tampering front at the issuer answers the
 * code exchange with an ID token of the test's making (test/support/forged-tokens.ts) and the
 * JWKS with the test's own keys. A token with the right claims signed by the published key
 * signs in (oidcc-client-test-idtoken-sig-rs256, the control), so each refusal is about the one
 * claim or signature changed: 400 invalid_request, no cookie, no session record.
 *
 * Mutation checks (each applied alone in a scratch worktree, the file run, reverted):
 * - src/oidc/flows.ts completeAuthorization: the payload decoded instead of checked
 *   (`const payload = JSON.parse(<the token's middle part>)` in place of `await verifyIdToken(...)`):
 *   both invalid-sig-rs256 tests, invalid-sig-es256, the unknown kid and kid-absent-multiple-jwks
 *   fail (they create a session). The claim modules (iss, aud, missing aud, sub, iat, nonce) and
 *   alg none / HS256 stay green under it: openid-client (oauth4webapi) checks those claims and the
 *   advertised algs at the code exchange, before verifyIdToken checks iss/aud/sub/iat/exp again;
 *   no single line of src/ removes both layers, so for them no one-line mutation exists.
 * - src/oidc/client.ts clientAuthentication: `ClientSecretBasic` -> `ClientSecretPost`:
 *   oidcc-client-test-client-secret-basic fails.
 * - src/oidc/id-token.ts: `algorithms: [...checks.algorithms]` -> `algorithms: ['PS256']`: the
 *   accepting tests fail (oidcc-client-test, idtoken-sig-rs256, the ES256 control,
 *   kid-absent-single-jwks), so none of them passes vacuously.
 */
import { BrowserClient } from '../support/browser-client.js';
import { signIn } from '../support/drive-login.js';
import { expectErrorBody, sessionIdFromCookie } from '../support/assertions.js';
import { digest } from '../../src/redis/keys.js';
import {
  changed,
  hs256With,
  idTokenClaimsFor,
  jwksOf,
  signedWith,
  signInWithForgedIdToken,
  signingKey,
  unsecured,
  withBrokenSignature,
  type Claims,
  type ForgedSignIn,
  type Forge,
  type SigningKey,
} from '../support/forged-tokens.js';
import { CLIENT_ID, CLIENT_SECRET, startRig, type Rig } from './rig.js';

const csrf = { 'x-csrf': '1' };

function expectRefused(result: ForgedSignIn): void {
  expectErrorBody(result.answer, 'invalid_request', 400);
  expect(result.cookie).toBeUndefined();
  expect(result.sessionsAfter).toBe(result.sessionsBefore);
}

async function expectSignedIn(rig: Rig, result: ForgedSignIn): Promise<void> {
  expect(result.answer.status).toBe(302);
  expect(result.cookie).toBeDefined();
  expect(result.sessionsAfter).toBe(result.sessionsBefore + 1);
  const user = await result.client.get(`${rig.gw.url}/auth/user`, { headers: csrf });
  expect(user.status).toBe(200);
  expect(user.json()).toMatchObject({ sub: 'alice' });
}

describe('the happy path at the real provider', () => {
  // A secret with every character client_secret_basic must form-encode (RFC 6749 §2.3.1).
  const secret = 'sec:ret+with%/ odd&chars=0123456789abcdef';
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig({ client: { client_secret: secret }, gateway: { clientSecret: secret } });
  });
  afterAll(() => rig?.close());

  it('oidcc-client-test: code flow with PKCE at the real provider ends signed in, /auth/user answers the user', async () => {
    const client = new BrowserClient();
    const result = await signIn(client, rig.gw.url, { returnTo: '/app' });
    expect(new URL(result.final.url).pathname).toBe('/app');
    expect(result.authorizeUrl.searchParams.get('response_type')).toBe('code');
    expect(result.authorizeUrl.searchParams.get('scope')?.split(' ')).toContain('openid');
    const user = await client.get(`${rig.gw.url}/auth/user`, { headers: csrf });
    expect(user.status).toBe(200);
    expect(user.json()).toMatchObject({ sub: 'alice' });
  });

  it('oidcc-client-test-client-secret-basic: the code exchange authenticates with HTTP Basic, id and secret form-encoded, nothing in the body', async () => {
    await signIn(new BrowserClient(), rig.gw.url);
    const exchange = rig.front.requests.filter((r) => r.method === 'POST' && r.path === '/token').at(-1);
    expect(exchange?.form.get('grant_type')).toBe('authorization_code');
    const [scheme, credentials] = (exchange?.headers.authorization ?? '').split(' ');
    expect(scheme).toBe('Basic');
    // Form-encoded parts: the secret's own ':' cannot split it, and both decode back exactly.
    const parts = Buffer.from(credentials ?? '', 'base64').toString('utf8').split(':');
    expect(parts).toHaveLength(2);
    const decode = (v: string) => decodeURIComponent(v.replace(/\+/g, ' '));
    expect(parts.map(decode)).toEqual([CLIENT_ID, secret]);
    expect(exchange?.form.has('client_secret')).toBe(false);
    expect(exchange?.form.has('client_assertion')).toBe(false);
  });
});

describe('ID token claims and signatures (the provider publishes one RSA and one EC key)', () => {
  let rig: Rig;
  let rsa: SigningKey;
  let ec: SigningKey;
  let stranger: SigningKey;
  beforeAll(async () => {
    rsa = await signingKey('RS256', 'published-rsa');
    ec = await signingKey('ES256', 'published-ec');
    stranger = await signingKey('RS256', 'stranger');
    // The provider holds both keys, so its metadata advertises RS256 and ES256 for ID tokens
    // (openid-client refuses an alg the provider does not advertise).
    rig = await startRig({ providerKeys: [rsa.privateJwk, ec.privateJwk] });
  });
  afterAll(() => rig?.close());

  /** Claims as the provider would issue them, changed by `changes`, then `forge`d. */
  const signInWith = (forge: Forge, changes: Claims = {}) =>
    signInWithForgedIdToken(rig, (authorizeUrl) => forge(changed(idTokenClaimsFor(authorizeUrl, rig.front.url), changes)), () => jwksOf(rsa, ec));

  it('oidcc-client-test-idtoken-sig-rs256: an RS256 token by the published key with the right claims signs in (the control)', async () => {
    await expectSignedIn(rig, await signInWith(signedWith(rsa)));
  });

  it.each<[string, string | null]>([
    ['untyped', null],
    ['typed JWT', 'JWT'],
    ['typed application/jwt', 'application/jwt'],
  ])('an ID token %s signs in (providers differ)', async (_name, typ) => {
    await expectSignedIn(rig, await signInWith(signedWith(rsa, { typ })));
  });

  // Fails if, in src/oidc/id-token.ts verifyIdToken, the typ check goes
  // (`if (typ !== undefined && ...) throw`): an access token or logout token the provider signed,
  // with the right claims, passed as an ID token.
  it.each(['at+jwt', 'application/at+jwt', 'logout+jwt', 'dpop+jwt'])('an ID token typed %s (another kind of token) is refused', async (typ) => {
    expectRefused(await signInWith(signedWith(rsa, { typ })));
  });

  it('oidcc-client-test-invalid-iss: an iss naming another issuer is refused', async () => {
    expectRefused(await signInWith(signedWith(rsa), { iss: 'https://attacker.example' }));
  });

  it('oidcc-client-test-missing-sub: a token without sub is refused', async () => {
    expectRefused(await signInWith(signedWith(rsa), { sub: undefined }));
  });

  // Fails if, in src/oidc/id-token.ts verifyIdToken, the sub check goes (openid-client and jose
  // check only that it is a string): every user a broken provider gave `sub: ""` was one
  // identity, and a 200 KB sub signed in (OIDC Core §2: at most 255 ASCII characters; found by
  // the sign-in red team).
  it('an empty sub, or one past 255 characters, is refused; one of 255 signs in', async () => {
    expectRefused(await signInWith(signedWith(rsa), { sub: '' }));
    expectRefused(await signInWith(signedWith(rsa), { sub: 'a'.repeat(256) }));
    const longest = await signInWith(signedWith(rsa), { sub: 'a'.repeat(255) });
    expect(longest.answer.status).toBe(302);
    expect((await longest.client.get(`${rig.gw.url}/auth/user`, { headers: csrf })).json<{ sub: string }>().sub).toHaveLength(255);
  });

  it('oidcc-client-test-invalid-aud: an aud naming another client is refused', async () => {
    expectRefused(await signInWith(signedWith(rsa), { aud: 'another-client' }));
  });

  // Fails if, in src/oidc/id-token.ts verifyIdToken, the audience check goes (jose checks only
  // that the client is among the audiences): a token also issued to another party signed in
  // (OIDC Core §3.1.3.7 step 3: "additional audiences not trusted by the Client").
  it('an aud naming the client and another audience is refused, azp the client or not', async () => {
    expectRefused(await signInWith(signedWith(rsa), { aud: ['bff-test', 'https://other-rp.example'], azp: 'bff-test' }));
    expectRefused(await signInWith(signedWith(rsa), { aud: ['bff-test', 'https://other-rp.example'] }));
  });

  it('an aud of the client alone, as a one-member array, signs in', async () => {
    await expectSignedIn(rig, await signInWith(signedWith(rsa), { aud: ['bff-test'] }));
  });

  // Fails if, in verifyIdToken, the azp check goes: openid-client reads azp only beside several
  // audiences, so a token naming another client as its authorized party signed in (step 5).
  it('an azp naming another client is refused; azp naming the client signs in', async () => {
    expectRefused(await signInWith(signedWith(rsa), { azp: 'another-client' }));
    await expectSignedIn(rig, await signInWith(signedWith(rsa), { azp: 'bff-test' }));
  });

  // Fails if, in src/oidc/authentication-checks.ts, the auth_time_in_future check is back
  // inside the max_age branch: GET /auth/user was a 500 for a session whose auth_time was
  // microseconds (no Date holds it), and a day-ahead auth_time met stepUp.maxAgeSeconds.
  it.each([
    ['a day ahead', () => Math.floor(Date.now() / 1000) + 24 * 3600],
    ['in microseconds', () => Date.now() * 1000],
  ])('an auth_time %s is refused, max_age not asked', async (_name, authTime) => {
    expectRefused(await signInWith(signedWith(rsa), { auth_time: authTime() }));
  });

  // Fails if, in src/http/signed-in-routes.ts isoDate is `new Date(seconds * 1000).toISOString()`
  // again: the RangeError was a 500 on every GET /auth/user of such a session.
  it('a session recorded with an auth_time no Date holds (before such were refused) still answers GET /auth/user', async () => {
    const result = await signInWith(signedWith(rsa));
    const d = digest(sessionIdFromCookie(result.cookie as string));
    const stored = await rig.gw.runtime.records.peek(d);
    if (!stored?.auth) throw new Error('the sign-in left no readable session');
    await rig.gw.runtime.records.write(d, { ...stored, auth: { ...stored.auth, authTime: 1.7e15 } });
    const user = await result.client.get(`${rig.gw.url}/auth/user`, { headers: { 'x-csrf': '1' } });
    expect(user.status).toBe(200);
    expect(user.json<{ authTime: unknown }>().authTime).toBeNull();
  });

  it('oidcc-client-test-missing-aud: a token without aud is refused', async () => {
    expectRefused(await signInWith(signedWith(rsa), { aud: undefined }));
  });

  it('oidcc-client-test-missing-iat: a token without iat is refused', async () => {
    expectRefused(await signInWith(signedWith(rsa), { iat: undefined }));
  });

  it('oidcc-client-test-nonce-invalid: a nonce other than the one sent is refused', async () => {
    expectRefused(await signInWith(signedWith(rsa), { nonce: 'a-nonce-this-browser-never-sent' }));
  });

  it('oidcc-client-test-invalid-sig-rs256: one flipped bit in an RS256 signature by the published key is refused', async () => {
    expectRefused(await signInWith(withBrokenSignature(signedWith(rsa))));
  });

  it("oidcc-client-test-invalid-sig-rs256: a signature by another key under the published key's kid is refused", async () => {
    expectRefused(await signInWith(signedWith(stranger, { kid: 'published-rsa' })));
  });

  it('ES256 by the published EC key with the right claims signs in (the control for invalid-sig-es256)', async () => {
    await expectSignedIn(rig, await signInWith(signedWith(ec)));
  });

  it('oidcc-client-test-invalid-sig-es256: one flipped bit in an ES256 signature by the published key is refused', async () => {
    expectRefused(await signInWith(withBrokenSignature(signedWith(ec))));
  });

  it('oidcc-client-test-invalid-sig-hs256: an HS256 token keyed with the client secret is refused (HS* is never accepted)', async () => {
    expectRefused(await signInWith(hs256With(CLIENT_SECRET)));
  });

  it('oidcc-client-test-idtoken-sig-none: an unsigned (alg none) token is refused, by design (SPEC §3: never none)', async () => {
    expectRefused(await signInWith(unsecured));
  });

  it('(beyond the plan) a token signed by a key the provider never published (unknown kid) is refused', async () => {
    expectRefused(await signInWith(signedWith(stranger)));
  });
});

describe('tokens without a kid', () => {
  it('oidcc-client-test-kid-absent-single-jwks: no kid, and the JWKS holds a single key without kid: signs in', async () => {
    const rig = await startRig();
    try {
      const only = await signingKey('RS256');
      const result = await signInWithForgedIdToken(rig, (url) => signedWith(only)(idTokenClaimsFor(url, rig.front.url)), () => jwksOf(only));
      await expectSignedIn(rig, result);
    } finally {
      await rig.close();
    }
  });

  it('oidcc-client-test-kid-absent-multiple-jwks: no kid, and the JWKS holds two keys without kid: refused (the plan allows refusing or trying each key)', async () => {
    const rig = await startRig();
    try {
      const first = await signingKey('RS256');
      const second = await signingKey('RS256');
      const result = await signInWithForgedIdToken(rig, (url) => signedWith(second)(idTokenClaimsFor(url, rig.front.url)), () => jwksOf(first, second));
      expectRefused(result);
    } finally {
      await rig.close();
    }
  });
});
