/**
 * The development provider's second factor (src/dev/idp/second-factor.ts), through the gateway:
 * a request that asks for urn:bff:acr:mfa gets a one-time code page after the password; the
 * right code yields that acr, a wrong one the page again, three wrong ones the login page again;
 * a request that does not ask gets no code page and the password acr.
 *
 * Mutation that fails this file: in src/dev/idp/second-factor.ts submitSecondFactor, change
 * `if (form.get('otp') !== pending.code) {` to `if (false) {` (any code is then accepted).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startStack, type Stack } from '../../support/stack.js';

const MFA = 'urn:bff:acr:mfa';
const csrf = { 'x-csrf': '1' };
let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack?.close());

const mfaLogin = `/auth/login?acr_values=${encodeURIComponent(MFA)}`;
const acrOf = async (client: BrowserClient) => ((await client.get(`${stack.gateway.url}/auth/user`, { headers: csrf })).json() as { acr: string | null }).acr;

it('asks for the code only when the stronger acr is requested, and the right code yields it', async () => {
  const plain = new BrowserClient();
  const first = await signIn(plain, stack.gateway.url, { loginPath: '/auth/login?acr_values=urn%3Abff%3Aacr%3Apwd' });
  expect(first.hops.some((h) => h.response?.text.includes('id="otp-code"'))).toBe(false);
  expect(await acrOf(plain)).toBe('urn:bff:acr:pwd');

  const strong = new BrowserClient();
  const second = await signIn(strong, stack.gateway.url, { loginPath: mfaLogin });
  expect(second.hops.filter((h) => h.response?.text.includes('id="otp-code"'))).toHaveLength(1);
  expect(await acrOf(strong)).toBe(MFA);
});

it('shows the code page again after a wrong code, and the login page after three', async () => {
  const client = new BrowserClient();
  await expect(signIn(client, stack.gateway.url, { loginPath: mfaLogin, otp: 'wrong' })).rejects.toThrow(/sign-in at the provider failed: 401 .*expired or was wrong too often/);
  expect(client.cookies(stack.gateway.url)[stack.gateway.config.derived.sessionCookieName]).toBeUndefined();
});
