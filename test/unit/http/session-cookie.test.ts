import { createRequire } from 'node:module';
import { sign } from 'cookie-signature';
import { digest } from '../../../src/redis/keys.js';
import { createCookieVerifier, sessionIdFromCookie } from '../../../src/http/session-cookie.js';

const secret = 'a'.repeat(40);
const cookie = (id: string, s = secret) => `bff=${encodeURIComponent(`s:${sign(id, s)}`)}`;

describe('session cookie verification', () => {
  it('returns the session ID of a cookie signed with any configured secret', () => {
    expect(sessionIdFromCookie(`x=1; ${cookie('sid-1')}`, 'bff', [secret])).toBe('sid-1');
    expect(sessionIdFromCookie(cookie('sid-2', 'old'.repeat(12)), 'bff', [secret, 'old'.repeat(12)])).toBe('sid-2');
  });

  it('refuses unsigned, forged, oversized and malformed values', () => {
    for (const header of ['bff=sid-1', cookie('sid-1', 'b'.repeat(40)), `bff=s%3A${'x'.repeat(400)}.sig`, 'bff=%E0%A4%A', '', undefined]) {
      expect(sessionIdFromCookie(header, 'bff', [secret])).toBeUndefined();
    }
  });

  it('stays correct while remembering a bounded number of verified values', () => {
    const verifier = createCookieVerifier('bff', [secret], 2);
    const verify = (header: string) => verifier(header)?.id;
    expect(verify(cookie('one'))).toBe('one');
    expect(verify(cookie('one'))).toBe('one');
    expect(verify(cookie('forged', 'c'.repeat(40)))).toBeUndefined();
    expect(verify(cookie('two'))).toBe('two');
    expect(verify(cookie('three'))).toBe('three');
    expect(verify(cookie('one'))).toBe('one'); // evicted, verified again
  });

  // Fails if session-cookie.ts parseCookies keeps the quotes (`cookies[name] = value.slice(1, -1)`
  // removed): express-session (its own cookie 0.7) signed the browser in, the proxy's reader not.
  it('reads a quoted value as express-session does', () => {
    const legacy = createRequire(import.meta.url)('express-session/node_modules/cookie') as { parse(h: string): Record<string, string> };
    const signed = `s:${sign('sid-q', secret)}`;
    for (const header of [`bff="${signed}"`, `x=1; bff="${encodeURIComponent(signed)}"`]) {
      expect(legacy.parse(header).bff).toBe(signed);
      expect(sessionIdFromCookie(header, 'bff', [secret])).toBe('sid-q');
    }
    // Quotes that are percent-encoded are not quotes to express-session: no session for either.
    // Fails if parseCookies lets cookie 1.x decode first (`{ decode: asSent }` removed).
    const encodedQuotes = `bff=%22${encodeURIComponent(signed)}%22`;
    expect(legacy.parse(encodedQuotes).bff).toBe(`"${signed}"`);
    expect(sessionIdFromCookie(encodedQuotes, 'bff', [secret])).toBeUndefined();
  });

  it('names the Redis keys by the digest of the verified ID, never by the cookie', () => {
    const verifier = createCookieVerifier('bff', [secret]);
    expect(verifier(cookie('sid-9'))).toEqual({ id: 'sid-9', digest: digest('sid-9') });
  });
});

// The verifier also remembers whole Cookie headers whose value verified (createCookieVerifier).
// Mutation check: key that memo by the header up to the signature (`header` →
// `header.slice(0, header.lastIndexOf('.'))` in its get and its set) → the first test fails.
describe('session cookie verification, remembered headers', () => {
  it('verifies a header it has not seen, even one that differs from a remembered one only in the signature', () => {
    const verifier = createCookieVerifier('bff', [secret]);
    const good = `theme=dark; ${cookie('sid-1')}`;
    expect(verifier(good)?.id).toBe('sid-1');
    const forged = good.slice(0, -3) + (good.endsWith('AAA') ? 'BBB' : 'AAA');
    expect(verifier(forged)).toBeUndefined();
    expect(verifier(good)?.id).toBe('sid-1');
  });

  it('answers a remembered header with the same entry, and still reads the cookie among changed others', () => {
    const verifier = createCookieVerifier('bff', [secret]);
    const first = verifier(`a=1; ${cookie('sid-2')}`);
    expect(verifier(`a=1; ${cookie('sid-2')}`)).toBe(first);
    expect(verifier(`a=2; ${cookie('sid-2')}; b=3`)?.id).toBe('sid-2');
    expect(verifier(`a=1; ${'x'.repeat(2000)}=y; ${cookie('sid-2')}`)?.id).toBe('sid-2');
  });
});
