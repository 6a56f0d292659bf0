/**
 * OpenID Foundation "Back-Channel Logout RP" plan (oidcc-client-back-channel-logout-rp), one
 * test per module, through the real endpoint (POST /auth/backchannel-logout, no cookie, no CSRF
 * header). Table: docs/conformance.md.
 *
 * Each test signs a user in at the real provider, then posts a logout token naming that
 * session's sid and sub, changed in the one way the module changes it. The plan expects 200 for
 * the valid token and 400 for the others (BCL §2.8), with Cache-Control: no-store; beyond the
 * status, the session must end, or survive, accordingly.
 *
 * The plan's client registers id_token_signed_response_alg RS256; the gateway's counterpart is
 * oidc.idTokenSigningAlgs, so it is set to [RS256] here, and the provider also publishes an EC
 * key for the wrong-alg module to sign with.
 *
 * Mutation checks (each applied alone in a scratch worktree, the file run, reverted):
 * - src/http/session-routes.ts: the sid branch dropped (always `registry.endByUser(...)`):
 *   rp-backchannel-rpinitlogout fails (the user's other session ends too).
 * - src/oidc/logout-token.ts: `algorithms: [...checks.algorithms],` deleted: wrong-alg fails;
 *   alg-none stays green (jose's jwtVerify never accepts an unsecured JWT, so no src line
 *   guards it alone).
 * - src/oidc/logout-token.ts: `if (!hasLogoutEvent(payload)) throw refuse(...)` removed:
 *   no-event and wrong-event fail.
 * - src/oidc/logout-token.ts: the `if ('nonce' in payload) throw ...` line deleted: with-nonce fails.
 * - src/oidc/logout-token.ts: `audience: checks.clientId,` deleted: wrong-aud fails.
 * - src/oidc/logout-token.ts: `issuer: checks.issuer,` deleted: wrong-iss fails.
 */
import { randomUUID } from 'node:crypto';
import { decodeJwt, SignJWT } from 'jose';
import { BrowserClient, type BrowserResponse } from '../support/browser-client.js';
import { signIn } from '../support/drive-login.js';
import { postLogoutToken } from '../support/session-calls.js';
import { expectErrorBody, tokensOfSession } from '../support/assertions.js';
import { signingKey, type SigningKey } from '../support/forged-tokens.js';
import { BACKCHANNEL_LOGOUT_EVENT } from '../support/oidc-provider.js';
import { CLIENT_ID, startRig, type Rig } from './rig.js';
import { LOGOUT_TOKEN_MAX_AGE_SECONDS } from '../../src/http/session-routes.js';
import { MAX_CLOCK_SKEW_SECONDS } from '../../src/clock.js';

const csrf = { 'x-csrf': '1' };
let rsa: SigningKey;
let ec: SigningKey;
let rig: Rig;

beforeAll(async () => {
  rsa = await signingKey('RS256', 'provider-rsa');
  ec = await signingKey('ES256', 'provider-ec');
  rig = await startRig({ providerKeys: [rsa.privateJwk, ec.privateJwk], gateway: { oidc: { idTokenSigningAlgs: ['RS256'] } } });
});

afterAll(() => rig?.close());

interface Session {
  client: BrowserClient;
  sid: string;
}

async function signedIn(gwUrl = rig.gw.url): Promise<Session> {
  const client = new BrowserClient();
  await signIn(client, gwUrl);
  const cookie = client.cookies(gwUrl)[rig.gw.config.derived.sessionCookieName] as string;
  const idToken = (await tokensOfSession(rig.gw, cookie))?.idToken as string;
  return { client, sid: decodeJwt(idToken).sid as string };
}

const userStatus = async (s: Session) => (await s.client.get(`${rig.gw.url}/auth/user`, { headers: csrf })).status;


/** A logout token as the provider would send it for `s`, with `changes` (undefined removes a claim). */
function claimsFor(s: Session, changes: Record<string, unknown> = {}): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = {
    iss: rig.provider.issuer,
    aud: CLIENT_ID,
    iat: now,
    exp: now + 120,
    jti: randomUUID(),
    sub: 'alice',
    sid: s.sid,
    events: { [BACKCHANNEL_LOGOUT_EVENT]: {} },
    ...changes,
  };
  return Object.fromEntries(Object.entries(claims).filter(([, v]) => v !== undefined));
}

const signedBy = (k: SigningKey, claims: Record<string, unknown>) =>
  new SignJWT(claims).setProtectedHeader({ alg: k.alg, kid: k.kid as string, typ: 'logout+jwt' }).sign(k.key);

async function expectRefusedAndSessionLives(s: Session, answer: BrowserResponse): Promise<void> {
  expectErrorBody(answer, 'invalid_request', 400);
  expect(await userStatus(s)).toBe(200);
}

describe('Back-Channel Logout RP', () => {
  it("oidcc-client-test-rp-backchannel-rpinitlogout: a valid logout token for the session's sid: 200, no-store, that session ends and the user's other session lives", async () => {
    const a = await signedIn();
    const b = await signedIn();
    const answer = await postLogoutToken(rig.gw.url, await signedBy(rsa, claimsFor(a)));
    expect(answer.status).toBe(200);
    expect(answer.headers.get('cache-control')).toContain('no-store');
    expect(await userStatus(a)).toBe(401);
    expect(await userStatus(b)).toBe(200);
  });

  // Fails if, in src/session/provider-logouts.ts endAll, the sub check goes
  // (`if (sub !== undefined && ...) continue;`): the sid's session ended whoever it belonged to.
  it("a valid logout token whose sid names alice's session but whose sub names another user: 200, and it ends nothing", async () => {
    const a = await signedIn();
    const answer = await postLogoutToken(rig.gw.url, await signedBy(rsa, claimsFor(a, { sub: 'mallory' })));
    expect(answer.status).toBe(200);
    expect(await userStatus(a)).toBe(200);
    // The same token naming alice ends it (the control).
    expect((await postLogoutToken(rig.gw.url, await signedBy(rsa, claimsFor(a)))).status).toBe(200);
    expect(await userStatus(a)).toBe(401);
  });

  it('oidcc-client-test-rp-backchannel-rpinitlogout-alg-none: an unsigned (alg none) logout token is refused with 400', async () => {
    const s = await signedIn();
    const part = (v: object) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const token = `${part({ alg: 'none', typ: 'logout+jwt' })}.${part(claimsFor(s))}.`;
    await expectRefusedAndSessionLives(s, await postLogoutToken(rig.gw.url, token));
  });

  it('oidcc-client-test-rp-backchannel-rpinitlogout-no-event: a logout token without events is refused with 400', async () => {
    const s = await signedIn();
    await expectRefusedAndSessionLives(s, await postLogoutToken(rig.gw.url, await signedBy(rsa, claimsFor(s, { events: undefined }))));
  });

  it('oidcc-client-test-rp-backchannel-rpinitlogout-with-nonce: a logout token carrying a nonce is refused with 400', async () => {
    const s = await signedIn();
    await expectRefusedAndSessionLives(s, await postLogoutToken(rig.gw.url, await signedBy(rsa, claimsFor(s, { nonce: randomUUID() }))));
  });

  it('oidcc-client-test-rp-backchannel-rpinitlogout-wrong-alg: ES256 by the published EC key, when RS256 is the allowed alg, is refused with 400', async () => {
    const s = await signedIn();
    await expectRefusedAndSessionLives(s, await postLogoutToken(rig.gw.url, await signedBy(ec, claimsFor(s))));
  });

  it('oidcc-client-test-rp-backchannel-rpinitlogout-wrong-aud: a logout token for another client is refused with 400', async () => {
    const s = await signedIn();
    await expectRefusedAndSessionLives(s, await postLogoutToken(rig.gw.url, await signedBy(rsa, claimsFor(s, { aud: 'another-client' }))));
  });

  it('oidcc-client-test-rp-backchannel-rpinitlogout-wrong-event: a logout token with another event is refused with 400', async () => {
    const s = await signedIn();
    const events = { 'http://schemas.openid.net/event/some-other-event': {} };
    await expectRefusedAndSessionLives(s, await postLogoutToken(rig.gw.url, await signedBy(rsa, claimsFor(s, { events }))));
  });

  it('oidcc-client-test-rp-backchannel-rpinitlogout-wrong-iss: a logout token from another issuer is refused with 400', async () => {
    const s = await signedIn();
    await expectRefusedAndSessionLives(s, await postLogoutToken(rig.gw.url, await signedBy(rsa, claimsFor(s, { iss: 'https://attacker.example' }))));
  });

  // Fails if, in src/oidc/logout-token.ts verifyLogoutToken, the event's value is checked with
  // `typeof ... === 'object'` again (null and arrays pass it): BCL §2.4 makes it a JSON object.
  it.each<[string, unknown]>([
    ['null', null],
    ['an array', []],
  ])('a logout token whose back-channel logout event is %s is refused with 400', async (_name, value) => {
    const s = await signedIn();
    const events = { [BACKCHANNEL_LOGOUT_EVENT]: value };
    await expectRefusedAndSessionLives(s, await postLogoutToken(rig.gw.url, await signedBy(rsa, claimsFor(s, { events }))));
  });

  // Fails if, in verifyLogoutToken, a sid that is no string is read as absent again
  // (`if (sid === null || sub === null) throw` removed): the token then named the user only, and
  // ended every session of theirs instead of one provider session's.
  // The empty string too (found by review): read as absent, it widened the logout the same way.
  it.each<[string, unknown]>([
    ['a number', 12345],
    ['an empty string', ''],
  ])("a logout token whose sid is %s is refused with 400, and none of the user's sessions ends", async (_name, sid) => {
    const [a, b] = [await signedIn(), await signedIn()];
    await expectRefusedAndSessionLives(a, await postLogoutToken(rig.gw.url, await signedBy(rsa, claimsFor(a, { sid }))));
    expect(await userStatus(b)).toBe(200);
  });

  // Fails if, in verifyLogoutToken, rememberUntil follows exp again (`Math.max(payload.exp ?? 0,
  // ...)`): Redis refused the jti's EX of 1e17, the answer was 503 after the session had ended,
  // and the token could be replayed.
  it('a logout token with an exp far ahead (1e17) ends the session with 200, and its jti is remembered as long as its iat allows', async () => {
    const s = await signedIn();
    const claims = claimsFor(s, { exp: 1e17 });
    const token = await signedBy(rsa, claims);
    expect((await postLogoutToken(rig.gw.url, token)).status).toBe(200);
    expect(await userStatus(s)).toBe(401);
    expectErrorBody(await postLogoutToken(rig.gw.url, token), 'invalid_request', 400);
    const [jti] = await rig.gw.runtime.redis.keys(`${rig.gw.config.redis.keyPrefix}jti:*`).then((keys) =>
      Promise.all(keys.map(async (k) => ({ k, ttl: await rig.gw.runtime.redis.ttl(k) }))).then((all) => all.sort((x, y) => y.ttl - x.ttl)),
    );
    expect(jti?.ttl).toBeGreaterThan(0);
    // Its life from iat, and the margin by which another process's clock may be behind.
    expect(jti?.ttl).toBeLessThanOrEqual(LOGOUT_TOKEN_MAX_AGE_SECONDS + rig.gw.config.oidc.clockToleranceSeconds + MAX_CLOCK_SKEW_SECONDS);
  });

  // BCL 1.0 made exp REQUIRED; providers built on its drafts send none. Refusing such a token
  // would keep the session alive past the provider's logout: it is accepted, bounded by its iat
  // (LOGOUT_TOKEN_MAX_AGE_SECONDS) and the jti replay cache, as any other.
  it('a logout token without exp (an older provider) ends the session; the same token again is refused', async () => {
    const s = await signedIn();
    const token = await signedBy(rsa, claimsFor(s, { exp: undefined }));
    expect((await postLogoutToken(rig.gw.url, token)).status).toBe(200);
    expect(await userStatus(s)).toBe(401);
    expectErrorBody(await postLogoutToken(rig.gw.url, token), 'invalid_request', 400);
  });

  it('(the control for wrong-alg) the same ES256 token is accepted by a gateway that allows ES256 (the default list)', async () => {
    // No sign-in needed: a valid token naming no session answers 200 (BCL §2.7).
    const defaults = await startRig({ providerKeys: [rsa.privateJwk, ec.privateJwk] });
    try {
      const token = await signedBy(ec, claimsFor({ client: new BrowserClient(), sid: 'no-such-session' }, { iss: defaults.provider.issuer }));
      expect((await postLogoutToken(defaults.gw.url, token)).status).toBe(200);
    } finally {
      await defaults.close();
    }
  });
});
