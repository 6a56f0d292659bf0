/**
 * SPEC §3, Back-Channel Logout 1.0 §2.4/§4.1: a logout token's `typ`, when present, must be
 * `logout+jwt` (RECOMMENDED) or the generic `JWT` older providers send; any other type names
 * another kind of token (cross-JWT confusion) and is refused without ending anything.
 */
import type { BrowserClient } from '../../support/browser-client.js';
import * as calls from '../../support/session-calls.js';
import { startStack, type Stack } from '../../support/stack.js';
import { expectErrorBody, tokensOfSession } from '../../support/assertions.js';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});

const signedInAs = (user: string) => calls.signedInAs(stack.gateway.url, user);
const userStatus = (client: BrowserClient) => calls.userStatus(stack.gateway.url, client);
const postLogoutToken = (token: string) => calls.postLogoutToken(stack.gateway.url, token);

describe('logout token typ', () => {
  it.each<[string, string | null]>([
    ['JWT (older providers)', 'JWT'],
    ['logout+jwt', 'logout+jwt'],
    ['application/logout+jwt', 'application/logout+jwt'],
    ['absent', null],
  ])('%s is accepted and ends the session', async (_name, typ) => {
    const alice = await signedInAs('alice');
    const res = await postLogoutToken(await stack.provider.signLogoutToken({ sub: 'alice' }, { typ }));
    expect(res.status).toBe(200);
    expect(await userStatus(alice)).toBe(401);
  });

  it.each(['at+jwt', 'id_token+jwt', 'dpop+jwt', 'secevent+jwt'])('%s is refused with 400 and ends nothing', async (typ) => {
    const alice = await signedInAs('alice');
    expectErrorBody(await postLogoutToken(await stack.provider.signLogoutToken({ sub: 'alice' }, { typ })), 'invalid_request', 400);
    expect(await userStatus(alice)).toBe(200);
  });

  // Fails if, in oidc/logout-token.ts, `typeof typ !== 'string' ||` is removed: a typ
  // that is not a string threw a TypeError there, answered 500.
  it.each<[string, unknown]>([
    ['a number', 1],
    ['null', null],
    ['true', true],
    ['an array', ['logout+jwt']],
    ['an object', { typ: 'logout+jwt' }],
  ])('a typ that is %s is refused with 400 and ends nothing', async (_name, typ) => {
    const alice = await signedInAs('alice');
    const token = await stack.provider.signLogoutToken({ sub: 'alice' }, { header: { typ } });
    expectErrorBody(await postLogoutToken(token), 'invalid_request', 400);
    expect(await userStatus(alice)).toBe(200);
  });

  it("accepting JWT does not let the provider's own ID token pass as a logout token", async () => {
    const alice = await signedInAs('alice');
    const cookie = alice.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
    const idToken = (await tokensOfSession(stack.gateway, cookie))?.idToken as string;
    expectErrorBody(await postLogoutToken(idToken), 'invalid_request', 400);
    expect(await userStatus(alice)).toBe(200);
  });
});
