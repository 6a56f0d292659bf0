/**
 * SPEC §3/§4: every working session can be found through the user's index, for
 * GET /auth/sessions and back-channel logout by sub. At the callback, the new session is
 * registered before its record is saved. Meanwhile the same user's GET /auth/sessions, on any
 * instance, reads the index, finds an entry with no record yet, and prunes it
 * (session/registry.ts list). The save then creates a session that nothing can find.
 *
 * Staged deterministically with two gateways on one Redis. Gateway A reaches Redis through a
 * TCP pass-through that stalls the callback's record write (the WRITE_RECORD script) on the
 * wire. While it waits, the user's other browser lists its sessions on gateway B. Then the
 * write goes through.
 *
 * Fails if, in http/auth-routes.ts callback, the second
 * `await withStore(() => registry.register(sessionDigest, auth));` (the one after
 * `await withStore(() => save(req));`) is removed.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { completeAtProvider, signIn, startLogin } from '../../support/drive-login.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { redisUrlForTests } from '../../support/redis-server.js';
import { startRedisStall, type RedisStall } from '../../support/redis-stall.js';

const csrf = { 'x-csrf': '1' };
/** A line only session/records.ts WRITE_RECORD sends: the session record write. */
const RECORD_WRITE = 'local val = ARGV[1]';

let stall: RedisStall;
let provider: TestProvider;
let gwA: TestGateway;
let gwB: TestGateway;

beforeAll(async () => {
  stall = await startRedisStall(redisUrlForTests());
  const [a, b] = [await reserveServer(), await reserveServer()];
  provider = await startTestProvider({
    clients: [gatewayClient(a.url, { redirect_uris: [`${a.url}/auth/callback`, `${b.url}/auth/callback`] })],
  });
  // Two instances of one deployment: same secrets, same key prefix, same Redis.
  const shared = { keyPrefix: `race${Date.now()}:`, session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] } };
  gwA = await startTestGateway(buildTestConfig({ ...shared, issuer: provider.issuer, publicUrl: a.url, redisUrl: stall.url }), a);
  gwB = await startTestGateway(buildTestConfig({ ...shared, issuer: provider.issuer, publicUrl: b.url }), b);
});

afterAll(async () => {
  stall?.release();
  await gwA?.close();
  await gwB?.close();
  await provider?.close();
  await stall?.close();
});

const listOn = async (gw: TestGateway, client: BrowserClient) => (await client.get(`${gw.url}/auth/sessions`, { headers: csrf })).json<unknown[]>();

it("a sign-in whose index entry another browser's /auth/sessions pruned before the record was saved is still listed and ended by sub", async () => {
  const laptop = new BrowserClient();
  await signIn(laptop, gwB.url);
  expect(await listOn(gwB, laptop)).toHaveLength(1);

  const phone = new BrowserClient();
  const { authorizeUrl } = await startLogin(phone, gwA.url);
  const callbackUrl = await completeAtProvider(phone, authorizeUrl);
  const held = stall.holdAt(RECORD_WRITE);
  const callback = phone.get(callbackUrl);
  try {
    // Registered, record not yet written: the listing skips and prunes the new entry.
    await held;
    expect(await listOn(gwB, laptop)).toHaveLength(1);
  } finally {
    stall.release();
  }
  expect((await callback).status).toBe(302);
  expect((await phone.get(`${gwA.url}/auth/user`, { headers: csrf })).status).toBe(200);

  expect(await listOn(gwB, laptop)).toHaveLength(2);
  const logout = await new BrowserClient().post(`${gwB.url}/auth/backchannel-logout`, {
    form: { logout_token: await provider.signLogoutToken({ sub: 'alice' }) },
  });
  expect(logout.status).toBe(200);
  expect((await phone.get(`${gwA.url}/auth/user`, { headers: csrf })).status).toBe(401);
  expect((await laptop.get(`${gwB.url}/auth/user`, { headers: csrf })).status).toBe(401);
});
