/**
 * The calls the session tests make again and again: a browser signed in as one of the test
 * provider's users, whether it is still signed in, and a back-channel logout delivery.
 */
import { BrowserClient, type BrowserResponse } from './browser-client.js';
import { signIn } from './drive-login.js';
import { eventually } from './wait.js';

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

/**
 * `path`'s status with a bare copy of a cookie (`name=value`: what a thief would send), asked
 * again while the gateway answers 503, the gap of a Redis failover (bounded).
 */
export async function statusThroughFailover(gatewayUrl: string, cookie: string, path: string): Promise<number> {
  let status = 0;
  await eventually(
    `${path} answered (not 503)`,
    30_000,
    async () => {
      const res = await fetch(`${gatewayUrl}${path}`, { headers: { cookie, ...csrf }, signal: AbortSignal.timeout(5_000) });
      status = res.status;
      await res.arrayBuffer();
      return status !== 503;
    },
    { intervalMs: 200 },
  );
  return status;
}
