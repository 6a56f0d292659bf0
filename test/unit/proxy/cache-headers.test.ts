/**
 * A user route's caching headers read for the cookie (proxy/cache-headers.ts). The browser's
 * side of the Vary rule is shown in Chromium (test/e2e/cache-across-users.test.ts); here, the
 * shared-cache rule of RFC 9111 §3.5, which no browser shows.
 *
 * The `private` cases fail if, in asCookieAnswer, `if (shareable || privateAlready) return headers;`
 * returns for every answer (`if (true) return headers;`): a CDN in front of the gateway kept one
 * user's answer for every user, since the browser's request carried no Authorization.
 */
import { asCookieAnswer } from '../../../src/proxy/cache-headers.js';

describe('asCookieAnswer', () => {
  it('marks an answer private unless it says shared caches may keep it, or is private or no-store already', () => {
    expect(asCookieAnswer(['Content-Type', 'application/json'])).toEqual(['Content-Type', 'application/json', 'Cache-Control', 'private']);
    expect(asCookieAnswer(['cache-control', 'max-age=300'])).toEqual(['cache-control', 'max-age=300, private']);
    expect(asCookieAnswer(['Cache-Control', 'no-cache'])).toEqual(['Cache-Control', 'no-cache, private']);
    // A qualified private names fields only: the rest of the answer is still shareable.
    expect(asCookieAnswer(['Cache-Control', 'private="Set-Cookie", max-age=60'])).toEqual(['Cache-Control', 'private="Set-Cookie", max-age=60, private']);
    for (const kept of ['public, max-age=60', 'max-age=60, s-maxage=600', 'must-revalidate', 'private', 'PRIVATE, max-age=5', 'no-store']) {
      expect(asCookieAnswer(['Cache-Control', kept])).toEqual(['Cache-Control', kept]);
    }
    // Two Cache-Control lines read as one list; `private` goes on the first.
    expect(asCookieAnswer(['Cache-Control', 'max-age=60', 'X', 'y', 'cache-control', 'no-transform'])).toEqual(['Cache-Control', 'max-age=60, private', 'X', 'y', 'cache-control', 'no-transform']);
    expect(asCookieAnswer(['Cache-Control', 'max-age=60', 'Cache-Control', 'public'])).toEqual(['Cache-Control', 'max-age=60', 'Cache-Control', 'public']);
  });

  it('reads Vary: Authorization as Vary: Cookie, once, and leaves other fields', () => {
    const vary = (value: string) => asCookieAnswer(['Vary', value, 'Cache-Control', 'no-store'])[1];
    expect(vary('Authorization')).toBe('Cookie');
    expect(vary('Accept-Encoding, authorization')).toBe('Accept-Encoding, Cookie');
    expect(vary('Cookie, Authorization')).toBe('Cookie');
    expect(vary('Accept-Encoding')).toBe('Accept-Encoding');
    expect(vary('*')).toBe('*');
  });
});
