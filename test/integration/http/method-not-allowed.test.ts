/**
 * A gateway endpoint asked with a method it does not answer says 405 `method_not_allowed` with
 * `Allow` (RFC 9110 §15.5.6), in the SPEC's error shape; every method `Allow` names is answered
 * by the endpoint itself (never 404 or 405), so the table in src/http/endpoints.ts cannot drift
 * from the routes. Until 0.6.9 every wrong method was 404 `not_found`, as for a path that does
 * not exist. Unknown paths stay 404 whatever the method, and so does `/metrics` on the main
 * port when it is served on `server.metricsPort`.
 *
 * Fails if src/app.ts answers without the table (`const allow = undefined`), or if a row of
 * AUTH_ENDPOINTS in src/http/endpoints.ts names the wrong methods.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { expectErrorBody } from '../../support/assertions.js';
import { startStack, type Stack } from '../../support/stack.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
const ENDPOINTS: Record<string, string> = {
  '/auth/login': 'GET, HEAD',
  '/auth/callback': 'GET, HEAD',
  '/auth/user': 'GET, HEAD',
  '/auth/logout': 'POST',
  '/auth/backchannel-logout': 'POST',
  '/auth/sessions': 'GET, HEAD',
  '/auth/sessions/some-id': 'DELETE',
  '/auth/events': 'GET, HEAD',
  '/healthz': 'GET, HEAD',
  '/readyz': 'GET, HEAD',
  '/metrics': 'GET, HEAD',
};

let stack: Stack;
let apart: Stack;
const client = new BrowserClient();

beforeAll(async () => {
  stack = await startStack();
  apart = await startStack({ config: { server: { metricsPort: 0 } } });
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await apart?.close();
});

const ask = (base: string, method: string, path: string) =>
  client.request(method, `${base}${path}`, { headers: { 'x-csrf': '1', accept: 'application/json' } });

describe.each(Object.entries(ENDPOINTS))('%s', (path, allow) => {
  const allowed = allow.split(', ');

  it.each(METHODS.filter((m) => !allowed.includes(m)))(`answers %s with 405 and Allow: ${allow}`, async (method) => {
    const res = await ask(stack.gateway.url, method, path);
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe(allow);
    if (method !== 'HEAD') expectErrorBody(res, 'method_not_allowed', 405);
  });

  it.each(allowed)('answers %s itself (neither 404 nor 405)', async (method) => {
    const res = await ask(stack.gateway.url, method, path);
    expect([404, 405]).not.toContain(res.status);
  });
});

it('keeps 404 for a path that is no endpoint, whatever the method, and with a trailing slash or other case the same as Express routes', async () => {
  for (const method of ['GET', 'POST', 'DELETE']) {
    expectErrorBody(await ask(stack.gateway.url, method, '/auth/nothing-here'), 'not_found', 404);
    expectErrorBody(await ask(stack.gateway.url, method, '/auth/sessions/a/b'), 'not_found', 404);
  }
  const slashed = await ask(stack.gateway.url, 'GET', '/Auth/Logout/');
  expect(slashed.status).toBe(405);
  expect(slashed.headers.get('allow')).toBe('POST');
});

it('keeps 404 for /metrics on the main port when server.metricsPort serves it', async () => {
  for (const method of ['GET', 'POST']) expectErrorBody(await ask(apart.gateway.url, method, '/metrics'), 'not_found', 404);
});
