/**
 * An https deployment end to end (SPEC §2 publicUrl/trustProxy, §5 cookies): the gateway
 * behind a TLS-terminating hop, as in production. The browser talks https to the hop only;
 * the hop speaks plain http to the gateway and appends X-Forwarded-For / X-Forwarded-Proto;
 * the gateway runs with `publicUrl: https://127.0.0.1:<hop port>` and `trustProxy: true`.
 * The test provider stays on http (allowed for loopback issuers).
 *
 * The browser is strict about Secure cookies (`honourSecure`): it stores a Secure or __Host-
 * cookie only from https and refuses a __Host- cookie that is not Secure, Path=/, no Domain,
 * so the sign-in works only if the login binding cookie survives those rules.
 *
 * Addresses: the browser connects from 127.0.0.3 and the hop connects to the gateway from
 * 127.0.0.2 (loopback aliases), so the chain the upstream sees names each hop.
 *
 * Mutation checks (each made by hand once in a throwaway worktree, each fails this file):
 * - src/config/derive.ts: `const secure = publicUrl.protocol === 'http:';` (no __Host-, no
 *   Secure on https): the cookie attribute assertions fail.
 * - src/proxy/headers.ts: `out['x-forwarded-for'] = peer;` in place of the chain on a trusted
 *   peer: the upstream sees only the hop, and the client chain assertion fails.
 * - src/http/auth-routes.ts: `if (!tx) {` in place of the binding check in the callback: the
 *   control test (a round trip without the login cookie) gets 302 instead of 400.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { BrowserClient, type BrowserResponse } from '../../support/browser-client.js';
import { completeAtProvider } from '../../support/drive-login.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { makeSelfSignedCertificate, type TlsCertificate } from '../../support/tls-cert.js';
import { expectHostCookies } from '../../support/set-cookie.js';
import { startTlsHop, type TlsHop } from '../../support/tls-hop.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const BROWSER_ADDRESS = '127.0.0.3';
const HOP_ADDRESS = '127.0.0.2';
const csrf = { 'x-csrf': '1' };

let certificate: TlsCertificate;
let hop: TlsHop;
let provider: TestProvider;
let upstream: Upstream;
let gw: TestGateway;

beforeAll(async () => {
  certificate = makeSelfSignedCertificate();
  const reserved = await reserveServer();
  hop = await startTlsHop({ certificate, target: reserved.url, localAddress: HOP_ADDRESS });
  provider = await startTestProvider({ clients: [gatewayClient(hop.url)] });
  upstream = await startUpstream();
  const config = buildTestConfig({
    issuer: provider.issuer,
    publicUrl: hop.url,
    server: { trustProxy: true },
    routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
  });
  gw = await startTestGateway(config, reserved);
});

afterAll(async () => {
  await gw?.close();
  await hop?.close();
  await upstream?.close();
  await provider?.close();
});

/** Every cookie the gateway set on these answers is __Host-, Secure, Path=/, no Domain, HttpOnly. */
const expectHostCookiesOn = (responses: BrowserResponse[]): string[] => expectHostCookies(responses.flatMap((r) => r.headers.getSetCookie()));

/** A redirect into the app: an absolute https URL on the public origin. */
function expectPublicRedirect(res: BrowserResponse, path: string): void {
  expect(res.status).toBe(302);
  expect(res.headers.get('location')).toBe(`${hop.url}${path}`);
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

describe('the gateway behind a TLS-terminating hop', () => {
  it('signs in, proxies and logs out over https with __Host- cookies, public redirects and the client chain', async () => {
    const browser = new BrowserClient({ ca: certificate.cert, localAddress: BROWSER_ADDRESS, honourSecure: true });
    const gatewayAnswers: BrowserResponse[] = [];
    const viaHop = async (res: Promise<BrowserResponse>): Promise<BrowserResponse> => {
      const answer = await res;
      gatewayAnswers.push(answer);
      return answer;
    };

    // Login: to the provider, with the redirect_uri on the public https origin.
    const login = await viaHop(browser.get(`${hop.url}/auth/login?returnTo=/home`));
    expect(login.status).toBe(302);
    const authorize = new URL(login.redirectUrl as string);
    expect(authorize.origin).toBe(new URL(provider.issuer).origin);
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${hop.url}/auth/callback`);
    expect(expectHostCookiesOn([login])).toEqual([expect.stringMatching(/^__Host-bff-login\./)]);
    expect(Object.keys(browser.cookies(hop.url))).toEqual([expect.stringMatching(/^__Host-bff-login\./)]);

    // The provider sends the browser back to the public origin; the login binding must come along.
    const callbackUrl = await completeAtProvider(browser, authorize);
    expect(new URL(callbackUrl).origin).toBe(hop.url);
    const callback = await viaHop(browser.get(callbackUrl));
    expectPublicRedirect(callback, '/home');
    expect(Object.keys(browser.cookies(hop.url))).toEqual(['__Host-bff']);

    // A proxied call: Bearer to the upstream, and the forwarding headers of an https deployment.
    upstream.reset();
    const api = await viaHop(browser.get(`${hop.url}/api/echo`, { headers: csrf }));
    expect(api.status).toBe(200);
    expect(upstream.requests).toHaveLength(1);
    const seen = (upstream.requests[0] as { headers: IncomingHttpHeaders }).headers;
    expect(header(seen, 'authorization')).toMatch(/^Bearer \S+$/);
    expect(header(seen, 'x-forwarded-proto')).toBe('https');
    expect(header(seen, 'x-forwarded-for')).toBe(`${BROWSER_ADDRESS}, ${HOP_ADDRESS}`);
    expect(header(seen, 'x-forwarded-host')).toBe(`127.0.0.1:${hop.port}`);
    expect(header(seen, 'cookie')).toBeUndefined();

    expect((await viaHop(browser.get(`${hop.url}/auth/user`, { headers: csrf }))).status).toBe(200);

    // Logout: the session cookie is cleared and the provider sends the browser back to the public origin.
    const logout = await viaHop(browser.post(`${hop.url}/auth/logout`, { headers: csrf }));
    expect(logout.status).toBe(200);
    expect(expectHostCookiesOn([logout])).toEqual(['__Host-bff']);
    const { logoutUrl } = logout.json<{ logoutUrl: string }>();
    expect(new URL(logoutUrl).searchParams.get('post_logout_redirect_uri')).toBe(`${hop.url}/`);
    expect(browser.cookies(hop.url)).toEqual({});
    expect((await viaHop(browser.get(`${hop.url}/auth/user`, { headers: csrf }))).status).toBe(401);

    // Every cookie of the whole run: __Host- (checked above per answer), none refused by the strict jar.
    expect(expectHostCookiesOn(gatewayAnswers).length).toBeGreaterThanOrEqual(4);
    expect(browser.refusedCookies).toEqual([]);
    // Every request reached the gateway through the hop, marked https.
    expect(hop.forwarded.length).toBe(gatewayAnswers.length);
    for (const f of hop.forwarded) expect(f.headers['x-forwarded-proto']).toBe('https');
  });

  it('refuses the same provider round trip without the login binding cookie (the control: the binding is what lets a callback in)', async () => {
    const browser = new BrowserClient({ ca: certificate.cert, localAddress: BROWSER_ADDRESS, honourSecure: true });
    const login = await browser.get(`${hop.url}/auth/login?returnTo=/home`);
    const callbackUrl = await completeAtProvider(browser, login.redirectUrl as string);
    const unbound = await browser.get(callbackUrl, { omitCookies: true });
    expect(unbound.status).toBe(400);
    expect(unbound.json()).toEqual({ error: 'invalid_state', error_description: expect.any(String) });
    expect(unbound.headers.getSetCookie().some((h) => h.startsWith('__Host-bff='))).toBe(false);
    expect(browser.cookies(hop.url)['__Host-bff']).toBeUndefined();
  });
});
