/**
 * OpenID Foundation "RP-Initiated Logout RP" plan (oidcc-client-rp-initiated-logout-rp), through
 * the real logout endpoint and the real provider's end-session endpoint. Table:
 * docs/conformance.md (the -other-state and -no-state modules are not applicable: the gateway
 * sends no state, see there).
 *
 * The plan's end-session checks are the provider's to make (a valid id_token_hint for this
 * client, a registered post_logout_redirect_uri); oidc-provider makes them, so the test follows
 * the gateway's logoutUrl at the real provider and requires it to land on the registered URI,
 * after the provider has sent its back-channel logout to the gateway.
 *
 * Mutation checks (each applied alone in a scratch worktree, the file run, reverted):
 * - src/oidc/flows.ts endSessionUrl: the `if (idTokenHint) params.id_token_hint = idTokenHint;`
 *   line deleted: rp-init-logout fails.
 */
import { BrowserClient } from '../support/browser-client.js';
import { parseForms, signIn } from '../support/drive-login.js';
import { tokensOfSession } from '../support/assertions.js';
import { CLIENT_ID, startRig, type Rig } from './rig.js';

const csrf = { 'x-csrf': '1' };
let rig: Rig;

beforeAll(async () => {
  rig = await startRig();
});

afterAll(() => rig?.close());

describe('RP-Initiated Logout RP', () => {
  it("oidcc-client-test-rp-init-logout: logout sends the browser to the end_session_endpoint with this session's ID token, the registered post_logout_redirect_uri and client_id; the provider accepts them and returns the browser there", async () => {
    const client = new BrowserClient();
    await signIn(client, rig.gw.url);
    const cookie = client.cookies(rig.gw.url)[rig.gw.config.derived.sessionCookieName] as string;
    const idToken = (await tokensOfSession(rig.gw, cookie))?.idToken;
    expect(idToken).toBeDefined();

    const answer = await client.post(`${rig.gw.url}/auth/logout`, { headers: csrf });
    expect(answer.status).toBe(200);
    const logoutUrl = new URL((answer.json() as { logoutUrl: string }).logoutUrl);
    const endSession = rig.gw.runtime.provider.get().metadata.end_session_endpoint as string;
    expect(`${logoutUrl.origin}${logoutUrl.pathname}`).toBe(endSession);
    expect(logoutUrl.searchParams.get('id_token_hint')).toBe(idToken);
    expect(logoutUrl.searchParams.get('post_logout_redirect_uri')).toBe(`${rig.gw.url}/`);
    expect(logoutUrl.searchParams.get('client_id')).toBe(CLIENT_ID);

    // At the provider: its confirmation page, then back to the registered URI.
    const backchannelBefore = rig.provider.counters.backchannelLogouts;
    const providerOrigin = new URL(endSession).origin;
    const atProvider = await client.follow(await client.get(logoutUrl), { stopBefore: (url) => url.origin !== providerOrigin });
    const form = parseForms(atProvider.final.text, atProvider.final.url).find((f) => f.buttons.some((b) => b.value === 'yes'));
    expect(form).toBeDefined();
    const confirmed = await client.post(form?.action ?? '', { form: { ...form?.fields, logout: 'yes' } });
    const back = await client.follow(confirmed, { stopBefore: (url) => url.origin !== providerOrigin });
    expect(back.stoppedAt).toBe(`${rig.gw.url}/`);
    expect(rig.provider.counters.backchannelLogouts).toBe(backchannelBefore + 1);
  });
});
