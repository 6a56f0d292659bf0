/**
 * A session-gated route's caching headers read for the cookie (proxy/cache-headers.ts). The
 * browser's side is shown in Chromium (test/e2e/cache-across-users.test.ts); here, the
 * shared-cache rule of RFC 9111 §3.5, which no browser shows, and the header parsing.
 *
 * The `private` cases fail if, in asCookieAnswer, `if (says === 'neither') {` becomes
 * `if (false) {`: a CDN in front of the gateway kept one user's answer for every visitor, since
 * the browser's request carried no Authorization.
 */
import { asCookieAnswer } from '../../../src/proxy/cache-headers.js';

const ok = (headers: string[]) => asCookieAnswer(headers, 200);

describe('asCookieAnswer', () => {
  it('marks an answer private unless it says shared caches may keep it, or is private or no-store already', () => {
    expect(ok(['Content-Type', 'application/json'])).toEqual(['Content-Type', 'application/json', 'Cache-Control', 'private', 'Vary', 'Cookie']);
    expect(ok(['cache-control', 'max-age=300'])).toEqual(['cache-control', 'max-age=300, private', 'Vary', 'Cookie']);
    expect(ok(['Cache-Control', 'no-cache'])).toEqual(['Cache-Control', 'no-cache, private', 'Vary', 'Cookie']);
    expect(ok(['Cache-Control', ''])).toEqual(['Cache-Control', 'private', 'Vary', 'Cookie']);
    // A qualified private names fields only: the rest of the answer is still shareable.
    expect(ok(['Cache-Control', 'private="Set-Cookie", max-age=60'])[1]).toBe('private="Set-Cookie", max-age=60, private');
    // Commas inside a quoted string do not split it: `public` here is a field name, not a directive.
    expect(ok(['Cache-Control', 'no-cache="a, public, b"'])[1]).toBe('no-cache="a, public, b", private');
    // must-revalidate lets a shared cache keep it by RFC 9111 §3.5; not here (see verdict).
    expect(ok(['Cache-Control', 'max-age=0, must-revalidate'])[1]).toBe('max-age=0, must-revalidate, private');
    // An escaped quote or backslash inside a quoted string does not end it; one that never ends says nothing.
    expect(ok(['Cache-Control', 'max-age=60, no-cache="a\\\\", x=", public, "'])[1]).toBe('max-age=60, no-cache="a\\\\", x=", public, ", private');
    // Fails if a value that does not parse is appended to (`, private` read inside its open quote).
    expect(ok(['Cache-Control', 'no-cache="a\\", public'])[1]).toBe('private');
    for (const kept of ['public, max-age=60', 'max-age=60, s-maxage=600', 'private', 'PRIVATE, max-age=5', 'no-store', 'private, x-private=1', 'no-cache="a\\"b", public']) {
      expect(ok(['Cache-Control', kept])[1]).toBe(kept);
    }
    // Two Cache-Control lines read as one list: `private` goes on the first, `public` in either keeps both.
    expect(ok(['Cache-Control', 'max-age=60', 'X', 'y', 'cache-control', 'no-transform']).slice(0, 6)).toEqual(['Cache-Control', 'max-age=60, private', 'X', 'y', 'cache-control', 'no-transform']);
    expect(ok(['Cache-Control', 'max-age=60', 'Cache-Control', 'public']).slice(0, 4)).toEqual(['Cache-Control', 'max-age=60', 'Cache-Control', 'public']);
  });

  // Fails if, in asCookieAnswer, the overrides are kept (`if (overrides && says !== 'shareable')` → `if (false)`).
  it('drops what tells a CDN or nginx to cache regardless of Cache-Control, unless the answer is shareable', () => {
    expect(ok(['CDN-Cache-Control', 'max-age=600', 'Surrogate-Control', 'max-age=600', 'X-Accel-Expires', '600', 'X', 'y'])).toEqual(['X', 'y', 'Cache-Control', 'private', 'Vary', 'Cookie']);
    expect(ok(['Cache-Control', 'public, max-age=60', 'CDN-Cache-Control', 'max-age=600'])).toEqual(['Cache-Control', 'public, max-age=60', 'CDN-Cache-Control', 'max-age=600', 'Vary', 'Cookie']);
  });

  it('adds no Cache-Control to a 304 that has none: it would replace the stored answer\'s', () => {
    expect(asCookieAnswer(['ETag', '"v1"'], 304)).toEqual(['ETag', '"v1"', 'Vary', 'Cookie']);
    expect(asCookieAnswer(['ETag', '"v1"', 'Cache-Control', 'max-age=60'], 304)).toEqual(['ETag', '"v1"', 'Cache-Control', 'max-age=60, private', 'Vary', 'Cookie']);
  });

  // Fails if varyOnCookie returns the upstream's value (`return value;` first): Vary: Authorization
  // matched every browser-side request, which carries none.
  it('varies on the cookie: Authorization read as Cookie, once; other fields and * kept; several lines folded', () => {
    const vary = (...values: string[]) => asCookieAnswer(values.flatMap((v) => ['Vary', v]).concat('Cache-Control', 'no-store'), 200);
    expect(vary('Authorization')).toEqual(['Vary', 'Cookie', 'Cache-Control', 'no-store']);
    expect(vary('Accept-Encoding, authorization')[1]).toBe('Accept-Encoding, Cookie');
    expect(vary('Cookie, Authorization')[1]).toBe('Cookie');
    expect(vary('Accept-Encoding')[1]).toBe('Accept-Encoding, Cookie');
    expect(vary('*')[1]).toBe('*');
    expect(vary('Accept, "Authorization')[1]).toBe('*');
    expect(vary('Accept', 'Authorization, Origin')).toEqual(['Vary', 'Accept, Origin, Cookie', 'Cache-Control', 'no-store']);
  });
});
