/**
 * One canonical request path at the trust boundary (SPEC §4), through the real HTTP path: real
 * provider, real Redis, real upstreams, one of which decodes paths the way WSGI, Go, servlet
 * containers and nginx do. Requests are written raw: fetch would normalise them before sending.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import express from 'express';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { rawExchange, type RawRequest } from '../../support/raw-http.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { expectErrorBody } from '../../support/assertions.js';

let stack: Stack;
let decoding: Upstream;
let reports: Upstream;
let cookieHeader: string;

/** An upstream that resolves paths as decoding servers do, and says which handler it ran. */
function decodingHandler(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  let resolved: string;
  try {
    resolved = new URL(decodeURIComponent(q === -1 ? url : url.slice(0, q)), 'http://upstream.invalid').pathname;
  } catch {
    res.writeHead(400).end();
    return;
  }
  const body = JSON.stringify({ resolved, handler: resolved === '/api/admin' || resolved.startsWith('/api/admin/') ? 'admin' : 'user', url });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

beforeAll(async () => {
  [decoding, reports] = await Promise.all([startUpstream(), startUpstream()]);
  stack = await startStack({
    config: {
      routes: [
        { path: '/api', target: decoding.url, auth: 'user' },
        { path: '/api/admin', target: decoding.url, auth: 'user', scopes: ['admin:write'] },
        { path: '/api/reports', target: reports.url, auth: 'user' },
        { path: '/s!p', target: decoding.url, auth: 'user', stripPrefix: true },
      ],
    },
  });
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  cookieHeader = `${stack.config.derived.sessionCookieName}=${client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string}`;
});

afterAll(async () => {
  await stack?.close();
  await Promise.all([decoding, reports].map((u) => u?.close()));
});

beforeEach(() => {
  for (const u of [decoding, reports]) u.reset();
  decoding.setHandler(decodingHandler);
});

const send = (target: string, extra: Partial<RawRequest> = {}) =>
  rawExchange(stack.gateway.url, { target, headers: { 'x-csrf': '1', cookie: cookieHeader }, ...extra });

describe('route confusion', () => {
  it("gives an encoded spelling of the admin route the admin route's scope check, against an upstream that decodes", async () => {
    for (const target of ['/api/%61dmin/users', '/api/adm%69n/users', '/api/%61%64%6D%69%6E']) {
      const res = await send(target);
      expect([target, res.status]).toEqual([target, 403]);
      expectErrorBody(res, 'insufficient_scope', 403);
    }
    expect(decoding.requests).toHaveLength(0);
    // The plain user route still works, and the upstream reads the same path the gateway matched.
    const ok = await send('/api/%75sers/%7Ealice');
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text)).toMatchObject({ handler: 'user', url: '/api/users/~alice', resolved: '/api/users/~alice' });
  });

  // Fails if, in proxy/routes.ts `match`, the line
  // `for (const shadow of shadows) if (under(loose, shadow) || withFormat(loose, shadow)) return ROUTE_AMBIGUOUS;`
  // is removed; `/api/adm%C4%B0n/users` (Java's case-blind reading) if config/canonical-path.ts
  // looseReading stops reading İ as I; `/api/admin.json` (Rails' format suffix) if
  // `|| withFormat(loose, shadow)` is dropped.
  it('refuses a path naming the admin route in another case, which an Express upstream serves there', async () => {
    // Express routes without regard to case (its default): the hazard is real.
    const app = express();
    app.get('/api/admin/*rest', (_req, res) => void res.json({ handler: 'admin' }));
    app.use((_req, res) => void res.json({ handler: 'user' }));
    decoding.setHandler(app);
    expect(await (await fetch(`${decoding.url}/api/ADMIN/users`)).json()).toEqual({ handler: 'admin' });
    decoding.reset();
    decoding.setHandler(app);

    for (const target of ['/api/ADMIN/users', '/api/Admin', '/api/%41dmin/users', '/api/adm%C4%B0n/users', '/api/admin.json']) {
      const res = await send(target);
      expect([target, res.status]).toEqual([target, 400]);
      expectErrorBody(res, 'invalid_request', 400);
    }
    expect(decoding.requests).toHaveLength(0);
    const ok = await send('/api/ADMINS/x');
    expect(JSON.parse(ok.text)).toEqual({ handler: 'user' });
  });

  it('forwards an encoded spelling of a route to that route, as the canonical path', async () => {
    const res = await send('/api/%72eports/daily?x=%2e%2e/%2F');
    expect(res.status).toBe(200);
    expect(reports.requests.map((r) => r.url)).toEqual(['/api/reports/daily?x=%2e%2e/%2F']);
    expect(decoding.requests).toHaveLength(0);
  });

  it('matches escapes that stay encoded as the upstream decodes them, and strips the prefix by segments', async () => {
    const res = await send('/s%21p/%7eitems/caf%c3%a9?q=%2e%2e/..%2F&x');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toMatchObject({ url: '/~items/caf%C3%A9?q=%2e%2e/..%2F&x', resolved: '/~items/caf%C3%A9' });
  });
});

describe('ambiguous paths', () => {
  it.each([
    '/api/x/..;/admin/users',
    '/api/..;/api/admin/users',
    '/api/admin;x/users',
    '/api/%2e%2e/api/admin',
    '/api/x/.%2E/admin',
    '/api/%252e%252e/admin',
    '/api/%252fadmin',
    '/api//admin/users',
    '/api/a%2Fb',
    '/api/a%5Cb',
    '/api/a\\b',
    '/api/%00',
    '/api/a%3Fb',
    '/api/admin./users',
    '/api/admin%20',
  ])('refuses %s with 400 invalid_request, upstream never called', async (target) => {
    const res = await send(target);
    expectErrorBody(res, 'invalid_request', 400);
    expect(JSON.parse(res.text).error_description).toBe('The request path is ambiguous.');
    expect(decoding.requests).toHaveLength(0);
    expect(reports.requests).toHaveLength(0);
  });

  it("refuses them on the gateway's own endpoints too, which see only canonical paths", async () => {
    expectErrorBody(await send('/auth/x/../user'), 'invalid_request', 400);
    expectErrorBody(await send('/auth//user'), 'invalid_request', 400);
    // A canonical spelling of /auth/user is /auth/user: its own answer, not a 404.
    expectErrorBody(await rawExchange(stack.gateway.url, { target: '/auth/%75ser', headers: { 'x-csrf': '1' } }), 'login_required', 401);
  });

  it('refuses request targets that are not origin-form', async () => {
    const { host } = new URL(stack.gateway.url);
    expectErrorBody(await send(`http://${host}/api/echo`), 'invalid_request', 400);
    expectErrorBody(await send('*', { method: 'OPTIONS' }), 'invalid_request', 400);
    expect(decoding.requests).toHaveLength(0);
  });
});
