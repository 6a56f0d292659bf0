/**
 * With an https publicUrl every cookie the gateway sets is `__Host-` (Secure, Path=/, no Domain;
 * RFC 6265bis §4.1.3.2), so a sibling subdomain can neither plant nor overwrite one: the login
 * binding cookie included (login CSRF). SPEC §5.
 *
 * The browser sees https://127.0.0.1:<port> (publicUrl); TLS would end in front of the gateway,
 * so the test talks plain http to the same port. Secure cookies follow publicUrl, not the hop.
 */
import { BrowserClient, type BrowserResponse } from '../../support/browser-client.js';
import { completeAtProvider } from '../../support/drive-login.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { expectHostCookies, setCookieAttributes } from '../../support/set-cookie.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

let provider: TestProvider;
let upstream: Upstream;
let gw: TestGateway;
let publicUrl: string;
/** Where the test actually connects: the same server, without TLS. */
let direct: string;

beforeAll(async () => {
  const reserved = await reserveServer();
  publicUrl = `https://127.0.0.1:${reserved.port}`;
  direct = reserved.url;
  provider = await startTestProvider({ clients: [gatewayClient(publicUrl)] });
  upstream = await startUpstream();
  const config = buildTestConfig({
    issuer: provider.issuer,
    publicUrl,
    routes: [{ path: '/api', target: upstream.url, auth: 'none' }],
  });
  gw = await startTestGateway(config, reserved);
});

afterAll(async () => {
  await gw?.close();
  await upstream?.close();
  await provider?.close();
});

const expectHostCookiesOn = (res: BrowserResponse): string[] => expectHostCookies(res.headers.getSetCookie());

/** The provider redirects the browser to publicUrl; the test delivers it to the gateway directly. */
const toDirect = (url: string) => url.replace(publicUrl, direct);

describe('cookies on an https publicUrl', () => {
  it('are all __Host- through login, callback and logout, and the redirect home is on publicUrl', async () => {
    const client = new BrowserClient();
    const login = await client.get(`${direct}/auth/login?returnTo=/home`);
    expect(login.status).toBe(302);
    const loginNames = expectHostCookiesOn(login);
    expect(loginNames).toEqual([expect.stringMatching(/^__Host-bff-login\.[A-Za-z0-9_-]+$/)]);
    const loginCookie = setCookieAttributes(login.headers.getSetCookie()[0] as string);
    expect(loginCookie.attrs.get('samesite')?.toLowerCase()).toBe('lax');
    expect(loginCookie.attrs.get('max-age')).toBe('600');

    const callback = await client.get(toDirect(await completeAtProvider(client, login.redirectUrl as string)));
    expect(callback.status).toBe(302);
    expect(callback.headers.get('location')).toBe(`${publicUrl}/home`);
    // The binding cookie is expired under the very name and path it was set with, and the session cookie set.
    expect(expectHostCookiesOn(callback).sort()).toEqual([loginCookie.name, '__Host-bff'].sort());
    expect(client.cookies(direct)[loginCookie.name]).toBeUndefined();

    const me = await client.get(`${direct}/auth/user`, { headers: { 'x-csrf': '1' } });
    expect(me.status).toBe(200);

    const logout = await client.post(`${direct}/auth/logout`, { headers: { 'x-csrf': '1' } });
    expect(logout.status).toBe(200);
    expect(expectHostCookiesOn(logout)).toEqual(['__Host-bff']);
  });

  it('never forwards the login or session cookies to an upstream', async () => {
    const client = new BrowserClient();
    const login = await client.get(`${direct}/auth/login`);
    await client.get(toDirect(await completeAtProvider(client, login.redirectUrl as string)));
    await client.get(`${direct}/auth/login`); // a second login in progress: its cookie is live in the jar
    const jar = Object.keys(client.cookies(direct));
    expect(jar).toEqual(expect.arrayContaining(['__Host-bff', expect.stringMatching(/^__Host-bff-login\./)]));

    upstream.reset();
    const res = await client.get(`${direct}/api/echo`, { headers: { cookie: 'theme=dark', 'x-csrf': '1' } });
    expect(res.status).toBe(200);
    expect(upstream.requests.map((r) => r.headers.cookie)).toEqual(['theme=dark']);
  });

  it('are at most five login cookies per browser: abandoned logins cannot grow the Cookie header without bound', async () => {
    const client = new BrowserClient();
    const loginCookies = () => Object.keys(client.cookies(direct)).filter((n) => n.startsWith('__Host-bff-login.'));
    for (let i = 1; i <= 5; i += 1) {
      await client.get(`${direct}/auth/login`);
      expect(loginCookies()).toHaveLength(i);
    }
    const sixth = await client.get(`${direct}/auth/login`);
    expect(sixth.status).toBe(302);
    // The five are expired (under their __Host- names and attributes) and only the new one is set.
    expect(expectHostCookiesOn(sixth)).toHaveLength(6);
    expect(loginCookies()).toHaveLength(1);
  });
});
