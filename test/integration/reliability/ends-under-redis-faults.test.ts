/**
 * A session ended on one instance while its streams are held on another, with the ending
 * instance's Redis link failing at the wrong moment (found by red team):
 *
 * - The removal is held on the wire past commandTimeoutMs, then reaches Redis after all (a
 *   latency spike): the end answered 503, no event was published, and the other instance's
 *   stream of a session now gone stayed open until its idle deadline. Fails if, in
 *   src/session/registry.ts end, the catch around `records.take` does not call onEnded.
 * - The removal lands, then the link drops before the signed-out event is published: the
 *   DELETE answered 204 and the event reached only the ending instance. Fails if, in
 *   src/session/events.ts publish, a failed signed-out is not queued again (`resendLater`).
 * - A logout's removal times out but lands: the logout answered 503, and its retry found no
 *   session, so nothing was revoked and the browser was never sent to the provider's end-session
 *   page. Fails if, in src/session/registry.ts end, the record is not kept for the retry
 *   (`keep: keepForRetry` → `keep: false`).
 * - A logout's removal lands and the DEL after it (express-session's destroy) fails: the logout
 *   answered 503 with nothing revoked, and its retry found no session (found by red team).
 *   Fails if, in src/http/signed-in-routes.ts endForLogout, `await destroy(req).catch(() => undefined)`
 *   becomes `await withStore(() => destroy(req))`.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { openStream, type HeldStream } from '../../support/live-streams.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { startRedisStall, type RedisStall } from '../../support/redis-stall.js';
import { startTcpGate, type TcpGate } from '../../support/tcp-gate.js';
import { expectErrorBody, revokedAtProvider, sessionIdFromCookie, tokensOfSession } from '../../support/assertions.js';
import { eventually, withTimeout } from '../../support/wait.js';
import { digest } from '../../../src/redis/keys.js';

const csrf = { 'x-csrf': '1' };
/** Unique to the TAKE script of session/records.ts (a session's end). */
const TAKE = "(ARGV[3] == '1' or redis.call('EXISTS', KEYS[2]) == 0)";
/** A held command shows up within this, or the marker no longer matches what is sent. */
const HELD_MS = 10_000;
/** Told within this, once the ending instance reaches Redis. */
const TOLD_MS = 10_000;

let redis: RedisServer;
let stall: RedisStall;
let gate: TcpGate;
let provider: TestProvider;
let a: TestGateway;
let b: TestGateway;

beforeAll(async () => {
  redis = await startRedisServer();
  stall = await startRedisStall(redis.url);
  gate = await startTcpGate(stall.url);
  const reserved = await reserveServer();
  provider = await startTestProvider({ clients: [gatewayClient(reserved.url)] });
  const config = buildTestConfig({ issuer: provider.issuer, publicUrl: reserved.url, redisUrl: redis.url, redis: { commandTimeoutMs: 1000 } });
  a = await startTestGateway(config, reserved);
  // B reaches Redis through a gate (its link can be cut and restored) and a stall (one command held).
  b = await startTestGateway({ ...config, redis: { ...config.redis, url: gate.url } });
});

afterAll(async () => {
  stall?.release();
  await b?.close();
  await a?.close();
  await gate?.close();
  await stall?.close();
  await provider?.close();
  await redis?.close();
});

async function signedInWithStreamOnA(user: string): Promise<{ client: BrowserClient; cookie: string; stream: HeldStream }> {
  const client = new BrowserClient();
  await signIn(client, a.url, { user, password: `${user}-password` });
  const name = a.config.derived.sessionCookieName;
  const cookie = client.cookies(a.url)[name] as string;
  client.setCookie(b.url, name, cookie);
  const stream = await openStream(`${a.url}/auth/events`, { cookie: `${name}=${cookie}`, 'sec-fetch-site': 'same-origin' });
  expect(stream.status).toBe(200);
  return { client, cookie, stream };
}

const recordExists = (cookie: string) => a.runtime.redis.exists(a.runtime.keys.session(digest(sessionIdFromCookie(cookie))));

it("a back-channel logout whose removal times out but lands: the other instance's stream is told", async () => {
  const { cookie, stream } = await signedInWithStreamOnA('bob');
  try {
    const held = stall.holdAt(TAKE);
    const delivery = new BrowserClient().post(`${b.url}/auth/backchannel-logout`, { form: { logout_token: await provider.signLogoutToken({ sub: 'bob' }) } });
    await withTimeout(held, HELD_MS, 'the TAKE script on the wire (is its text still matched?)');
    expect((await delivery).status).toBe(503);
    stall.release();
    await eventually('the removal to land', TOLD_MS, async () => (await recordExists(cookie)) === 0 || undefined);
    const told = await stream.waitForEvent('signed-out', TOLD_MS);
    expect(JSON.parse(told.data)).toMatchObject({ reason: 'provider-logout' });
  } finally {
    stream.destroy();
  }
}, 40_000);

it("a DELETE /auth/sessions/{id} whose ending instance loses Redis right after the removal: the other instance's stream is told once it is back", async () => {
  const phone = await signedInWithStreamOnA('alice');
  const laptop = await signedInWithStreamOnA('alice');
  laptop.stream.destroy();
  try {
    const listed = (await phone.client.get(`${a.url}/auth/sessions`, { headers: csrf })).json<Array<{ id: string; current: boolean }>>();
    const phoneSession = listed.find((s) => s.current)?.id as string;
    // The index clean-up after the removal is held, then B's link to Redis drops.
    const held = stall.holdAt('$4\r\nhdel\r\n');
    const ended = laptop.client.request('DELETE', `${b.url}/auth/sessions/${phoneSession}`, { headers: csrf });
    await withTimeout(held, HELD_MS, 'the index clean-up (HDEL) on the wire');
    gate.shut();
    expect((await ended).status).toBe(204);
    stall.release();
    expect(await recordExists(phone.cookie)).toBe(0);
    expect(phone.stream.isClosed()).toBe(false);
    gate.open();
    const told = await phone.stream.waitForEvent('signed-out', TOLD_MS);
    expect(JSON.parse(told.data)).toMatchObject({ reason: 'revoked' });
  } finally {
    phone.stream.destroy();
  }
}, 40_000);

/** Signed in on A, its cookie sent to B; its refresh token, live at the provider. */
async function signedInForLogout(user: string) {
  const { client, cookie, stream } = await signedInWithStreamOnA(user);
  stream.destroy();
  const tokens = await tokensOfSession(a, cookie);
  expect((await provider.introspect(tokens?.refreshToken as string)).active).toBe(true);
  return { client, cookie, tokens };
}

/** The logout's answer names the provider's end-session page, hinted with the session's ID token. */
function expectEndSessionUrl(res: { status: number; json<T>(): T }, idToken: string | undefined) {
  expect(res.status).toBe(200);
  const url = new URL(res.json<{ logoutUrl: string }>().logoutUrl);
  expect(url.origin).toBe(new URL(provider.issuer).origin);
  expect(url.searchParams.get('id_token_hint')).toBe(idToken);
}

const revoked = (token: string | undefined) => revokedAtProvider(provider, token, TOLD_MS);
const keptCopyExists = (cookie: string) => a.runtime.redis.exists(a.runtime.keys.takenRecord(digest(sessionIdFromCookie(cookie))));

it('a logout whose removal times out but lands: its retry revokes the tokens and sends the browser to the provider', async () => {
  const { client, cookie, tokens } = await signedInForLogout('alice');
  const held = stall.holdAt(TAKE);
  const first = client.post(`${b.url}/auth/logout`, { headers: csrf });
  await withTimeout(held, HELD_MS, 'the TAKE script on the wire (is its text still matched?)');
  expectErrorBody(await first, 'session_store_unavailable', 503);
  stall.release();
  await eventually('the removal to land', TOLD_MS, async () => (await recordExists(cookie)) === 0 || undefined);
  expect(await keptCopyExists(cookie)).toBe(1);

  expectEndSessionUrl(await client.post(`${b.url}/auth/logout`, { headers: csrf }), tokens?.idToken);
  await revoked(tokens?.refreshToken);
  expect(await keptCopyExists(cookie)).toBe(0);
  // Reclaimed once: a third try is a logout without a session.
  expect((await client.post(`${b.url}/auth/logout`, { headers: csrf })).json()).toEqual({ logoutUrl: '/' });
}, 40_000);

it('a logout whose DEL after the removal fails: answered as any logout, the tokens revoked', async () => {
  const { client, cookie, tokens } = await signedInForLogout('alice');
  const held = stall.holdAt('$3\r\ndel\r\n');
  const first = client.post(`${b.url}/auth/logout`, { headers: csrf });
  try {
    await withTimeout(held, HELD_MS, 'the DEL on the wire');
    // Answered while the DEL is still held past commandTimeoutMs.
    expectEndSessionUrl(await withTimeout(first, HELD_MS, 'the logout answered'), tokens?.idToken);
  } finally {
    stall.release();
  }
  await revoked(tokens?.refreshToken);
  expect(await recordExists(cookie)).toBe(0);
}, 40_000);

// Fails if, in src/http/signed-in-routes.ts logout, the `registry.release(...)` after the revocation is left out.
it('a logout Redis answers in time leaves no copy of the record behind', async () => {
  const { client, cookie, tokens } = await signedInForLogout('alice');
  expectEndSessionUrl(await client.post(`${b.url}/auth/logout`, { headers: csrf }), tokens?.idToken);
  expect(await recordExists(cookie)).toBe(0);
  expect(await keptCopyExists(cookie)).toBe(0);
}, 40_000);
