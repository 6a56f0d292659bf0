import { compileTrust } from '../../../src/proxy/trust.js';
import { connectionNominated, filterSetCookie, forwardingHeaders, stripCookies } from '../../../src/proxy/headers.js';

const ours = (name: string) => name === 'bff' || name.startsWith('bff-login.');

describe('proxied request headers', () => {
  it("removes only the gateway's cookies from the Cookie header", () => {
    expect(stripCookies('a=1; bff=s%3Asecret; b=2; bff-login.abc=x', ours)).toBe('a=1; b=2');
    expect(stripCookies('bff=s%3Asecret', ours)).toBeUndefined();
    expect(stripCookies(undefined, ours)).toBeUndefined();
    expect(stripCookies('bffx=1', ours)).toBe('bffx=1');
  });

  it('drops browser-sent forwarding headers and sets its own when the proxy is not trusted', () => {
    const out = forwardingHeaders({
      headers: { 'x-forwarded-for': '6.6.6.6', forwarded: 'for=6.6.6.6', 'x-real-ip': '6.6.6.6' },
      remoteAddress: '10.0.0.5',
      trust: compileTrust(false),
      publicProtocol: 'https',
      publicHost: 'app.example.com',
    });
    expect(out).toMatchObject({
      forwarded: undefined,
      'x-real-ip': undefined,
      'x-forwarded-for': '10.0.0.5',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'app.example.com',
    });
  });

  it("extends a trusted load balancer's forwarding chain", () => {
    const out = forwardingHeaders({
      headers: { 'x-forwarded-for': '1.2.3.4', 'x-forwarded-proto': 'https' },
      remoteAddress: '10.0.0.1',
      trust: compileTrust(true),
      publicProtocol: 'https',
      publicHost: 'app.example.com',
    });
    expect(out['x-forwarded-for']).toBe('1.2.3.4, 10.0.0.1');
    expect('x-forwarded-proto' in out).toBe(false);
  });

  it('treats headers named in Connection as hop-by-hop', () => {
    expect(connectionNominated({ connection: 'keep-alive, X-Foo, x-bar' })).toEqual(['x-foo', 'x-bar']);
    expect(connectionNominated({})).toEqual([]);
  });

  it("drops upstream Set-Cookie headers that would overwrite the gateway's cookies", () => {
    expect(filterSetCookie(['bff=attacker; Path=/', 'theirs=1; Path=/'], ours)).toEqual(['theirs=1; Path=/']);
  });
});
