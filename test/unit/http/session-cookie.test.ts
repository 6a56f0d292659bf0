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

  it('names the Redis keys by the digest of the verified ID, never by the cookie', () => {
    const verifier = createCookieVerifier('bff', [secret]);
    expect(verifier(cookie('sid-9'))).toEqual({ id: 'sid-9', digest: digest('sid-9') });
  });
});
