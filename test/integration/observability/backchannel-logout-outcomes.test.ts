/**
 * Back-channel logouts counted by outcome, and a logout token the provider signed yet the
 * gateway refused said at warn (found by the observability red team: with the provider's clock
 * 10 minutes ahead, every logout was refused 400, the users stayed signed in here, and nothing
 * but a debug line and a 400 among all others said so). A token nobody could have signed is
 * anybody's to send: counted, not said.
 *
 * Mutations that fail this file (by hand, once): src/oidc/logout-token.ts refusing a claim
 * failure as unsigned (`refuseSigned('its claims` → `refuse('its claims`); src/http/session-routes.ts
 * noteRefused without its warn line.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { BACKCHANNEL_LOGOUT_EVENT } from '../../support/oidc-provider.js';
import { startStack, type Stack } from '../../support/stack.js';
import { tokensOfSession } from '../../support/assertions.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ config: { logLevel: 'info' } });
}, 60_000);
afterAll(() => stack?.close());

const outcomes = async (): Promise<Record<string, number>> => {
  const text = await stack.gateway.runtime.metrics.registry.metrics();
  return Object.fromEntries([...text.matchAll(/^bff_backchannel_logouts_total\{outcome="(\w+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]));
};
const post = async (token: string) => (await new BrowserClient().post(`${stack.gateway.url}/auth/backchannel-logout`, { form: { logout_token: token } })).status;
const sign = (claims: Record<string, unknown>, key: 'provider' | 'foreign' = 'provider') =>
  stack.provider.signLogoutToken({ sub: 'alice', events: { [BACKCHANNEL_LOGOUT_EVENT]: {} }, ...claims }, { key });
const refusals = () => stack.gateway.logs.map((l) => JSON.parse(l) as { event?: string; reason?: string; level: number }).filter((l) => l.event === 'backchannel_logout_refused');

it('counts each outcome, and says at warn only a token the provider signed that was refused', async () => {
  const before = await outcomes();
  // A provider clock 10 minutes ahead: its tokens' iat is in the future here.
  expect(await post(await sign({ iat: Math.floor(Date.now() / 1000) + 600 }))).toBe(400);
  expect(await post(await sign({}, 'foreign'))).toBe(400);
  await signIn(new BrowserClient(), stack.gateway.url);
  const good = await sign({});
  expect(await post(good)).toBe(200);
  expect(await post(good)).toBe(400);
  const after = await outcomes();
  const delta = Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]));
  expect(delta).toEqual({ ended: 1, replayed: 1, refused: 1, invalid: 1 });
  expect(refusals()).toEqual([expect.objectContaining({ level: 40, reason: 'its claims (iss, aud, iat, exp) did not verify' })]);
});

// Found by review: every user holds a token the provider signed (the ID token, the logoutUrl's
// id_token_hint). Posted as a logout token it verified, had no logout event, and counted as
// `refused` at warn: one user could keep BffBackchannelLogoutsRefused firing. A token without the
// back-channel logout event is `invalid`, fresh or expired. Fails if src/oidc/logout-token.ts
// refuses a token without the event as signed (`throw refuse('it is no logout token` →
// `throw refuseSigned('it is no logout token`, either of the two).
it("counts a user's own ID token posted as a logout token as invalid, and says nothing at warn", async () => {
  const browser = new BrowserClient();
  await signIn(browser, stack.gateway.url);
  const name = stack.config.derived.sessionCookieName;
  const idToken = (await tokensOfSession(stack.gateway, browser.cookies(stack.gateway.url)[name] as string))?.idToken;
  expect(idToken).toMatch(/^ey/);
  const said = refusals().length;
  const before = await outcomes();
  expect(await post(idToken as string)).toBe(400);
  // Signed by the provider, no event, past its age: a claim failure of a token that is no logout token.
  expect(await post(await stack.provider.signLogoutToken({ sub: 'alice', iat: Math.floor(Date.now() / 1000) - 3600, events: undefined }))).toBe(400);
  // Signed, fresh, every claim a logout token has but the event.
  expect(await post(await stack.provider.signLogoutToken({ sub: 'alice', events: undefined }))).toBe(400);
  const after = await outcomes();
  expect(after.invalid! - (before.invalid ?? 0)).toBe(3);
  expect(after.refused).toBe(before.refused);
  expect(refusals()).toHaveLength(said);
  expect((await browser.get(`${stack.gateway.url}/auth/user`, { headers: { 'x-csrf': '1' } })).status).toBe(200);
});
