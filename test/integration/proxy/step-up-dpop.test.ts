/**
 * Step-up challenges in the DPoP scheme (RFC 9470 with RFC 9449 §7.1) through the real gateway,
 * oidc-provider and an upstream: on a DPoP route the upstream's
 * `WWW-Authenticate: DPoP error="insufficient_user_authentication", …` becomes 401
 * step_up_required, alone or next to a Bearer challenge, without the upstream's headers or body.
 *
 * Mutation that fails this file (checked by hand): in src/proxy/step-up.ts, make STEP_UP_SCHEMES
 * `new Set(['bearer'])` (the DPoP challenge then reaches the browser as the upstream's 401).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { expectNoSecretIn, tokensOfSession } from '../../support/assertions.js';
import { createTestClock, type TestGateway } from '../../support/gateway.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const MFA = 'urn:bff:acr:mfa';
const csrf = { 'x-csrf': '1' };
const clock = createTestClock();
let challengeHeader: string | string[] = '';
let upstream: Upstream;
let stack: Stack;
let gw: TestGateway;

/** A DPoP resource server that asks every call for a stronger sign-in, in the DPoP scheme. */
function resourceServer(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  if (!String(req.headers.authorization ?? '').startsWith('DPoP ') || typeof req.headers.dpop !== 'string') {
    res.writeHead(400, { 'content-type': 'text/plain' }).end('not a DPoP call');
    return;
  }
  res.writeHead(401, { 'www-authenticate': challengeHeader, 'x-upstream-detail': 'rs-internal', 'content-type': 'text/plain' });
  res.end('upstream says: step up please');
}

beforeAll(async () => {
  upstream = await startUpstream();
  upstream.setHandler(resourceServer);
  stack = await startStack({
    clock,
    config: { routes: [{ path: '/api', target: upstream.url, auth: 'user', dpop: true }] },
  });
  gw = stack.gateway;
});

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

async function callAfterSignIn(header: string | string[]) {
  challengeHeader = header;
  const client = new BrowserClient();
  await signIn(client, gw.url);
  const res = await client.get(`${gw.url}/api/pay`, { headers: { ...csrf, referer: `${gw.url}/checkout` } });
  return { client, res };
}

function stepUpBody(res: { status: number; headers: Headers; text: string }): Record<string, unknown> {
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate')).toBeNull();
  expect(res.headers.get('x-upstream-detail')).toBeNull();
  expect(res.text).not.toContain('upstream says');
  const body = JSON.parse(res.text) as Record<string, unknown>;
  expect(body.error).toBe('step_up_required');
  return body;
}

it('maps a DPoP insufficient_user_authentication challenge on a DPoP route to 401 step_up_required', async () => {
  const { client, res } = await callAfterSignIn(`DPoP algs="ES256", error="insufficient_user_authentication", acr_values="${MFA}", max_age=120`);
  // The upstream was really called with a DPoP token and proof.
  expect(upstream.requests.at(-1)?.headers.authorization).toMatch(/^DPoP /);
  const body = stepUpBody(res);
  expect(body).toMatchObject({ acr_values: MFA, max_age: 120 });
  expect(body.loginUrl).toBe(`/auth/login?acr_values=${encodeURIComponent(MFA)}&max_age=120&returnTo=%2Fcheckout`);
  const tokens = await tokensOfSession(gw, client.cookies(gw.url)[gw.config.derived.sessionCookieName] as string);
  expectNoSecretIn(`${res.text}\n${[...res.headers].join('\n')}\n${gw.logs.join('\n')}`, { accessToken: tokens?.accessToken, refreshToken: tokens?.refreshToken }, 'the answer and the log');
  // Not a refused token: no refresh.
  expect(stack.provider.counters.grants.refresh_token ?? 0).toBe(0);
});

it('finds it in a header with several challenges (DPoP …, Bearer …) and prefers the DPoP one', async () => {
  const { res } = await callAfterSignIn(
    `DPoP algs="ES256", error="insufficient_user_authentication", acr_values="${MFA}", Bearer realm="api", error="insufficient_user_authentication", max_age=0`,
  );
  expect(stepUpBody(res)).toMatchObject({ acr_values: MFA, max_age: null });
});

it('finds it on a second header line, and leaves a hostile acr_values out of the URL and the body', async () => {
  const { res } = await callAfterSignIn(['Bearer realm="api"', 'DPoP error="insufficient_user_authentication", acr_values="a&returnTo=//evil.example \\"x", max_age=7']);
  const body = stepUpBody(res);
  expect(body).toMatchObject({ acr_values: null, max_age: 7, loginUrl: '/auth/login?max_age=7&returnTo=%2Fcheckout' });
});
