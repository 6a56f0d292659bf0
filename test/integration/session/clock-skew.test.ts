/**
 * Processes of one deployment whose clocks differ (found by red team). The session's end is
 * its signer's clock reading plus the absolute timeout, judged by whichever process serves it;
 * its index entries (the user's sessions, the provider session's set) expire on Redis's clock.
 * With the signer 60 s ahead, a process on time served the session for a minute after its
 * index entries were gone: missing from GET /auth/sessions, and a back-channel logout answered
 * 200 and ended nothing, so a copied cookie lived on after the provider's logout.
 *
 * Mutation that fails this file (checked by hand): src/session/registry.ts register,
 * `indexTtlSeconds` back to `absoluteTimeoutSeconds` (the skew margin dropped).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { signIn } from '../../support/drive-login.js';
import { sessionIdFromCookie } from '../../support/assertions.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { postLogoutToken } from '../../support/session-calls.js';
import { eventually } from '../../support/wait.js';
import { digest } from '../../../src/redis/keys.js';

const ABSOLUTE = 3;
const AHEAD_SECONDS = 60;
let provider: TestProvider;
let ahead: TestGateway;
let onTime: TestGateway;

beforeAll(async () => {
  const [a, b] = [await reserveServer(), await reserveServer()];
  provider = await startTestProvider({ clients: [gatewayClient(a.url, { redirect_uris: [`${a.url}/auth/callback`, `${b.url}/auth/callback`] })] });
  const shared = {
    keyPrefix: `skew${Date.now()}:`,
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()], absoluteTimeoutSeconds: ABSOLUTE, idleTimeoutSeconds: ABSOLUTE },
  };
  const clock = createTestClock();
  clock.advance(AHEAD_SECONDS);
  ahead = await startTestGateway(buildTestConfig({ ...shared, issuer: provider.issuer, publicUrl: a.url }), a, { clock });
  onTime = await startTestGateway(buildTestConfig({ ...shared, issuer: provider.issuer, publicUrl: b.url }), b);
});

afterAll(async () => {
  await ahead?.close();
  await onTime?.close();
  await provider?.close();
});

let copied = '';
/** A call as a copied cookie makes it: the cookie only. */
async function asCopy(gw: TestGateway, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${gw.url}${path}`, { ...init, headers: { cookie: `${gw.config.derived.sessionCookieName}=${copied}`, 'x-csrf': '1' } });
}

it('a session signed in on a process ahead of the others stays listed, and ended by a back-channel logout, for as long as another serves it', async () => {
  const browser = new BrowserClient();
  await signIn(browser, ahead.url);
  copied = browser.cookies(ahead.url)[ahead.config.derived.sessionCookieName] as string;
  const auth = (await ahead.runtime.records.peek(digest(sessionIdFromCookie(copied))))?.auth;
  if (!auth?.sid) throw new Error('the test provider names a sid');
  const signedInAt = Date.now();

  // Past the absolute timeout on Redis's clock (and the test's), still served by the process
  // on time: by its clock the signer's createdAt + ABSOLUTE is a minute away. The calls keep
  // the record's idle TTL sliding.
  await eventually('past the absolute timeout on Redis, the session still served', (ABSOLUTE + 5) * 1000, async () => {
    const status = (await asCopy(onTime, '/auth/user')).status;
    if (status !== 200) throw new Error(`the session answered ${status}`);
    return Date.now() > signedInAt + (ABSOLUTE + 1) * 1000;
  }, { intervalMs: 250 });

  expect(((await (await asCopy(onTime, '/auth/sessions')).json()) as unknown[]).length).toBe(1);
  expect((await postLogoutToken(onTime.url, await provider.signLogoutToken({ sid: auth.sid, sub: auth.sub }))).status).toBe(200);
  expect((await asCopy(onTime, '/auth/user')).status).toBe(401);
});
