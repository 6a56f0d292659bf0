import fc from 'fast-check';
import { isSameOriginRelativePath } from '../../../src/http/return-to.js';

describe('returnTo validation', () => {
  it.each(['/', '/x', '/a/b?c=d#e', '/%2F%2Fevil.example', '/path with%20encoded'.replace(' ', '%20')])('accepts %s', (value) => {
    expect(isSameOriginRelativePath(value)).toBe(true);
  });

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
  ])('refuses %j', (value) => {
    expect(isSameOriginRelativePath(value)).toBe(false);
  });

  it('never accepts a value that a browser would resolve to another origin', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), (tail) => {
        for (const value of [tail, `/${tail}`, `//${tail}`, `/\\${tail}`]) {
          if (!isSameOriginRelativePath(value)) continue;
          // Resolve like a browser would against the app's origin (WHATWG URL, as browsers do).
          expect(new URL(value, 'https://app.example.com').origin).toBe('https://app.example.com');
          expect(value.startsWith('/')).toBe(true);
        }
      }),
      { numRuns: 2000 },
    );
  });
});
