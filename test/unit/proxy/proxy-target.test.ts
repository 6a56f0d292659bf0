/**
 * The target handed to httpxy carries the URL's own fields, so the Host header it computes is
 * the one the URL names (a default port stays out of it).
 *
 * Mutation checks (by hand, once): src/proxy/proxy-target.ts: drop `host: target.host` from the
 * plain object → the first test fails (httpxy would then send `Host: api.example:80`). Move
 * `if (target.search) return target;` above the IPv6 test (as 73a1576 had it) → the IPv6 test
 * fails: a bracketed target with a query went to httpxy as a URL, which it cannot connect to.
 */
import { proxyTarget } from '../../../src/proxy/proxy-target.js';

describe('proxyTarget', () => {
  it("copies a target's host, hostname, port, protocol and path; a default port stays out of Host", () => {
    expect(proxyTarget(new URL('http://api.example/v2'))).toEqual({ protocol: 'http:', host: 'api.example', hostname: 'api.example', port: '', pathname: '/v2', search: '' });
    expect(proxyTarget(new URL('https://api.example:8443'))).toEqual({ protocol: 'https:', host: 'api.example:8443', hostname: 'api.example', port: '8443', pathname: '/', search: '' });
  });

  it('keeps the URL itself for a target with a query', () => {
    const target = new URL('http://api.example/t?tenant=a');
    expect(proxyTarget(target)).toBe(target);
  });

  it('gives a bracketed IPv6 literal as the bare address', () => {
    expect(proxyTarget(new URL('http://[::1]:8080'))).toMatchObject({ hostname: '::1', port: '8080' });
    expect(proxyTarget(new URL('http://[::]:8080'))).toMatchObject({ hostname: '::1' });
    expect(proxyTarget(new URL('http://[::1]:8080/t?tenant=a'))).toMatchObject({ hostname: '::1', pathname: '/t' });
  });
});
