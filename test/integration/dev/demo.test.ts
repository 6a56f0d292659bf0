/**
 * The embedded default (SPEC §1): config/default.yaml on free ports, in one process (gateway +
 * dev OpenID provider + demo API), signed in over plain HTTP like a browser would.
 *
 * Mutation check: in src/demo.ts, `acrInEveryIdToken: true` → `false`: /auth/user's acr is null
 * and the sign-in test fails.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startDemoOnFreePorts, type RunningDemo } from '../../support/demo.js';
import { expectNoSecretIn, tokensOfSession } from '../../support/assertions.js';
import type { TestGateway } from '../../support/gateway.js';

let demo: RunningDemo;
const csrf = { 'x-csrf': '1', accept: 'application/json' };
const html = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };

beforeAll(async () => {
  demo = await startDemoOnFreePorts();
}, 30_000);

afterAll(async () => {
  await demo?.stop();
});

/** CSP directive name → its source list. */
function cspDirectives(header: string | null): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const part of (header ?? '').split(';')) {
    const [name, ...values] = part.trim().split(/\s+/);
    if (name) out.set(name.toLowerCase(), values);
  }
  return out;
}

function expectStrictCsp(header: string | null): void {
  expect(header).toBeTruthy();
  const csp = cspDirectives(header);
  // Scripts come from the gateway's origin only: no inline script, no eval, no wildcard.
  const scripts = csp.get('script-src') ?? csp.get('default-src');
  expect(scripts).toBeDefined();
  expect(scripts).toContain("'self'");
  for (const loose of ["'unsafe-inline'", "'unsafe-eval'", '*', 'http:', 'https:', 'data:']) expect(scripts).not.toContain(loose);
  expect(csp.get('default-src')).toEqual(["'self'"]);
  expect(csp.get('object-src')).toEqual(["'none'"]);
  expect(csp.get('base-uri')).toBeDefined();
  expect(csp.get('frame-ancestors')).toBeDefined();
  expect(csp.get('frame-ancestors')).not.toContain('*');
}

describe('the embedded demo (config/default.yaml)', () => {
  it('is ready: Redis answers and the provider metadata is loaded', async () => {
    const client = new BrowserClient();
    const res = await client.get(`${demo.url}/readyz`);
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ status: 'ready' });
  });

  it('serves the demo SPA at / with a strict Content-Security-Policy', async () => {
    const client = new BrowserClient();
    const res = await client.get(`${demo.url}/`, { headers: html });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.text).toContain('data-testid="sign-in"');
    expect(res.text).toContain('<script type="module" src="/app.js"></script>');
    expectStrictCsp(res.headers.get('content-security-policy'));
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('answers index.html for an unknown client-side route (spaFallback), but not for a missing file', async () => {
    const client = new BrowserClient();
    const index = await client.get(`${demo.url}/`, { headers: html });
    const route = await client.get(`${demo.url}/some/route`, { headers: html });
    expect(route.status).toBe(200);
    expect(route.headers.get('content-type')).toMatch(/^text\/html/);
    expect(route.text).toBe(index.text);
    expectStrictCsp(route.headers.get('content-security-policy'));

    const missingFile = await client.get(`${demo.url}/some/route/missing.js`, { headers: html });
    expect(missingFile.status).toBe(404);
    expect(missingFile.text).not.toBe(index.text);
  });

  it('signs alice in through the dev provider, then /auth/user and GET /api/hello (via the demo API) show alice', async () => {
    const client = new BrowserClient();
    const before = await client.get(`${demo.url}/auth/user`, { headers: csrf });
    expect(before.status).toBe(401);

    const result = await signIn(client, demo.url, { user: 'alice', password: 'alice-password', returnTo: '/' });
    expect(result.authorizeUrl.origin).toBe(demo.idpUrl);
    expect(result.callbackUrl.startsWith(`${demo.url}/auth/callback?`)).toBe(true);
    // The callback leads back to returnTo with the code gone from the URL.
    expect(result.final.status).toBe(200);
    expect(new URL(result.final.url).pathname).toBe('/');
    expect(result.final.url).not.toMatch(/[?&#](code|state|access_token|id_token)=/);

    const cookieName = demo.config.derived.sessionCookieName;
    const cookie = client.cookieDetails(demo.url).find((c) => c.name === cookieName);
    expect(cookie).toBeDefined();
    expect(cookie?.httpOnly).toBe(true);
    const tokens = await tokensOfSession({ runtime: demo.gateway.runtime } as TestGateway, cookie?.value ?? '');
    expect(tokens?.accessToken).toBeTruthy();
    const secrets = { accessToken: tokens?.accessToken, refreshToken: tokens?.refreshToken, idToken: tokens?.idToken };

    const user = await client.get(`${demo.url}/auth/user`, { headers: csrf });
    expect(user.status).toBe(200);
    const body = user.json<{ sub: string; claims: Record<string, unknown>; scopes: string[]; acr: string | null; authTime: string | null }>();
    expect(body.sub).toBe('alice');
    // The demo's provider says how the user signed in even unasked (acrInEveryIdToken).
    expect(body.acr).toBe('urn:bff:acr:pwd');
    expect(Number.isNaN(Date.parse(body.authTime ?? ''))).toBe(false);
    expect(body.claims).toMatchObject({ name: 'Alice Liddell', email: 'alice@example.com' });
    expect(body.scopes).toEqual(expect.arrayContaining(['openid', 'api:read']));
    expectNoSecretIn(user.text, secrets, 'the /auth/user body');

    const api = await client.get(`${demo.url}/api/hello`, { headers: csrf });
    expect(api.status).toBe(200);
    const answer = api.json<{ message: string; subject: string; scopes: string[]; audience: unknown; clientId: string }>();
    expect(answer).toMatchObject({ message: 'Hello from the demo API', subject: 'alice', clientId: 'bff-demo', path: '/api/hello' });
    expect(answer.scopes).toContain('api:read');
    expect([answer.audience].flat()).toContain(demo.apiUrl);
    expectNoSecretIn(api.text, secrets, 'the /api/hello body');

    for (const hop of result.hops.filter((h) => h.url.startsWith(demo.url))) {
      expectNoSecretIn(hop.response.text, secrets, `the body of ${new URL(hop.url).pathname}`);
    }
  });

  it('refuses the proxied call without the CSRF header, and without a session', async () => {
    const client = new BrowserClient();
    const noCsrf = await client.get(`${demo.url}/api/hello`, { headers: { accept: 'application/json' } });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.json()).toMatchObject({ error: 'csrf_check_failed' });
    const noSession = await client.get(`${demo.url}/api/hello`, { headers: csrf });
    expect(noSession.status).toBe(401);
    expect(noSession.json()).toMatchObject({ error: 'login_required' });
  });
});
