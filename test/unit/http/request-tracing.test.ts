/**
 * The names a gateway endpoint's span may have (request-tracing.ts): templates only, never
 * the request's own path, so no id, token or query can reach a span name.
 *
 * Mutation that fails it: in src/http/endpoints.ts endpointOf, return
 * `${authPath}${rest}` for every path under authPath (drop the `AUTH_ENDPOINTS.includes` test).
 */
import { endpointTemplate, methodOf } from '../../../src/http/request-tracing.js';
import type { IncomingMessage } from 'node:http';

describe('endpointTemplate', () => {
  it.each([
    ['/auth/login', '/auth/login'],
    ['/auth/callback', '/auth/callback'],
    ['/auth/user/', '/auth/user'],
    ['/AUTH/Logout', '/auth/logout'],
    ['/auth/backchannel-logout', '/auth/backchannel-logout'],
    ['/auth/sessions', '/auth/sessions'],
    ['/auth/sessions/3f9a-opaque-handle', '/auth/sessions/:id'],
    ['/auth/events', '/auth/events'],
    ['/auth/eyJhbGciOiJSUzI1NiJ9.token-looking', '/auth/*'],
    ['/auth/sessions/a/b', '/auth/*'],
    ['/app/secret-looking-path', '/*'],
    ['/', '/*'],
  ])('names %s as %s', (path, template) => {
    expect(endpointTemplate(path, '/auth')).toBe(template);
  });

  it('follows a custom authPath', () => {
    expect(endpointTemplate('/bff/login', '/bff')).toBe('/bff/login');
    expect(endpointTemplate('/auth/login', '/bff')).toBe('/*');
  });

  it.each(['/healthz', '/readyz', '/metrics'])('does not trace the probe %s', (path) => {
    expect(endpointTemplate(path, '/auth')).toBeUndefined();
  });
});

describe('methodOf', () => {
  it('keeps standard methods and names anything else _OTHER', () => {
    expect(methodOf({ method: 'DELETE' } as IncomingMessage)).toBe('DELETE');
    expect(methodOf({ method: 'PROPFIND' } as IncomingMessage)).toBe('_OTHER');
    expect(methodOf({} as IncomingMessage)).toBe('_OTHER');
  });
});
