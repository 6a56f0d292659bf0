/**
 * The calls the session tests make again and again: a browser signed in as one of the test
 * provider's users, whether it is still signed in, and a back-channel logout delivery.
 */
import { BrowserClient, type BrowserResponse } from './browser-client.js';
import { signIn } from './drive-login.js';

const csrf = { 'x-csrf': '1' };

/** A new browser signed in as `user` (the test provider's accounts: password `<user>-password`). */
export async function signedInAs(gatewayUrl: string, user: string): Promise<BrowserClient> {
  const client = new BrowserClient();
  await signIn(client, gatewayUrl, { user, password: `${user}-password` });
  return client;
}

/** GET /auth/user's status for this browser: 200 while signed in, 401 once not. */
export const userStatus = async (gatewayUrl: string, client: BrowserClient): Promise<number> =>
  (await client.get(`${gatewayUrl}/auth/user`, { headers: csrf })).status;

/** POST /auth/backchannel-logout as a provider delivers it: no cookie, the token as a form. */
export const postLogoutToken = (gatewayUrl: string, token: string): Promise<BrowserResponse> =>
  new BrowserClient().post(`${gatewayUrl}/auth/backchannel-logout`, { form: { logout_token: token } });
