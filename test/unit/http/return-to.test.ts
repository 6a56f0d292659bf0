import fc from 'fast-check';
import { appUrl, isSameOriginRelativePath } from '../../../src/http/return-to.js';

const PUBLIC_URL = 'https://app.example.com/';
const ORIGIN = 'https://app.example.com';

/** Pieces an attacker would combine: separators, dot segments and their encodings, whitespace. */
const piece = fc.constantFrom(
  '/', '//', '/./', '/../', '\\', '.', '..', '%2e', '%2E', '%2e%2e', '%2f', '%2F', '%5c', '%5C', '%09', '%0a', '%0d', '%00', '%20', '%25', '%252f',
  '\t', '\n', '\r', ' ', ':', '@', '?', '#', '&', '=', ';', 'evil.example', 'https:', 'javascript:', 'a', 'x', '%', '%zz', 'ü', '%C3%BC',
);
const crafted = fc.array(piece, { maxLength: 12 }).map((parts) => parts.join(''));
const anyString = fc.oneof(fc.string({ maxLength: 60 }), fc.string({ unit: 'binary', maxLength: 40 }), crafted, crafted.map((s) => `/${s}`));

describe('returnTo validation', () => {
  it.each(['/', '/x', '/a/b?c=d#e', '/path%20encoded', '/caf%C3%A9', '/a/../b', '/x?next=%2F%2Fevil.example', '/x#//evil.example'])(
    'accepts %s',
    (value) => {
      expect(isSameOriginRelativePath(value)).toBe(true);
    },
  );

  it.each([
    'https://evil.example',
    '//evil.example',
    '/\\evil.example',
    '\\\\evil.example',
    'https:%2F%2Fevil.example',
    'javascript:alert(1)',
    '/\t/evil.example',
    '/\n/evil.example',
    ' /x',
    'x',
    '',
    '/' + 'a'.repeat(3000),
    // Normalised forms that a browser (or a decoding router) reads as `//evil.example`:
    '/.//evil.example/phish',
    '/./\\evil.example',
    '/%2e//evil.example',
    '/%2e%2e//evil.example',
    '/a/..//evil.example',
    '/%2F%2Fevil.example',
    '/%2f%2fevil.example',
    '/%252f%252fevil.example',
    '/%5cevil.example',
    '/%09/evil.example',
    '/%0a/evil.example',
    '/%zz',
  ])('refuses %j', (value) => {
    expect(isSameOriginRelativePath(value)).toBe(false);
  });

  it('never accepts a value whose redirect leaves the origin, or that reads as `//` once normalised', () => {
    fc.assert(
      fc.property(anyString, (value) => {
        if (!isSameOriginRelativePath(value)) return;
        // The Location the gateway sends, on success and with an error code, resolved like a browser would.
        for (const location of [appUrl(ORIGIN, value), appUrl(ORIGIN, value, { error: 'access_denied' })]) {
          expect(new URL(location, PUBLIC_URL).origin).toBe(ORIGIN);
        }
        // Even read as a relative reference, the accepted value stays home and is not `//`-rooted.
        const relative = new URL(value, PUBLIC_URL);
        expect(relative.origin).toBe(ORIGIN);
        expect(relative.pathname.startsWith('//')).toBe(false);
        expect(decodeURIComponent(relative.pathname).startsWith('//')).toBe(false);
      }),
      { numRuns: 5000 },
    );
  });
});

describe('appUrl', () => {
  it('builds an absolute URL on the origin, keeping path, query and fragment and adding parameters', () => {
    expect(appUrl(ORIGIN, '/orders?x=1#top')).toBe('https://app.example.com/orders?x=1#top');
    expect(appUrl(ORIGIN, '/start', { error: 'access_denied' })).toBe('https://app.example.com/start?error=access_denied');
    expect(appUrl('http://127.0.0.1:3000', '/')).toBe('http://127.0.0.1:3000/');
  });

  it('cannot be steered to another origin, whatever it is given', () => {
    fc.assert(
      fc.property(anyString, (value) => {
        expect(new URL(appUrl(ORIGIN, value, { error: 'x' }), PUBLIC_URL).origin).toBe(ORIGIN);
      }),
      { numRuns: 2000 },
    );
  });
});
