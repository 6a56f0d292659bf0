/**
 * OIDC Core §3.1.3.7 steps 12–13 as the callback applies them: acr against the acr values asked
 * for (as essential), auth_time against max_age, with the clock tolerance.
 *
 * Mutation that fails this file: in src/oidc/authentication-checks.ts, delete the line
 * `if (authTime === undefined) throw refused('auth_time_missing');`. And `Number.isFinite` →
 * `Number.isInteger` for auth_time: "records acr and auth_time…" fails (a fractional auth_time
 * read as missing made every max_age sign-in fail).
 */
import { GatewayError } from '../../../src/errors.js';
import { checkAuthentication } from '../../../src/oidc/authentication-checks.js';

const NOW = 1_800_000_000;
const refused = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return err instanceof GatewayError ? err.code : 'other';
  }
  return 'accepted';
};

describe('checkAuthentication', () => {
  it('records acr and auth_time whether or not they were asked about', () => {
    expect(checkAuthentication({ acr: 'a', auth_time: NOW - 5 }, undefined, NOW, 0)).toEqual({ acr: 'a', authTime: NOW - 5 });
    expect(checkAuthentication({}, {}, NOW, 0)).toEqual({});
    // Malformed claims are not recorded.
    expect(checkAuthentication({ acr: 7, auth_time: 'yesterday' }, undefined, NOW, 0)).toEqual({});
    // A NumericDate with fractional seconds counts, in whole seconds (RFC 7519 §2).
    expect(checkAuthentication({ auth_time: NOW - 5.75 }, { maxAge: 60 }, NOW, 0)).toEqual({ authTime: NOW - 6 });
  });

  it('requires the acr to be one of the values asked for', () => {
    expect(refused(() => checkAuthentication({ acr: 'b' }, { acrValues: ['a', 'b'] }, NOW, 0))).toBe('accepted');
    expect(refused(() => checkAuthentication({ acr: 'c' }, { acrValues: ['a', 'b'] }, NOW, 0))).toBe('invalid_request');
    expect(refused(() => checkAuthentication({}, { acrValues: ['a'] }, NOW, 0))).toBe('invalid_request');
  });

  it('requires auth_time with max_age, no older than max_age plus the tolerance, and not in the future', () => {
    expect(refused(() => checkAuthentication({}, { maxAge: 60 }, NOW, 30))).toBe('invalid_request');
    expect(refused(() => checkAuthentication({ auth_time: NOW - 90 }, { maxAge: 60 }, NOW, 30))).toBe('accepted');
    expect(refused(() => checkAuthentication({ auth_time: NOW - 91 }, { maxAge: 60 }, NOW, 30))).toBe('invalid_request');
    expect(refused(() => checkAuthentication({ auth_time: NOW + 30 }, { maxAge: 0 }, NOW, 30))).toBe('accepted');
    expect(refused(() => checkAuthentication({ auth_time: NOW + 31 }, { maxAge: 0 }, NOW, 30))).toBe('invalid_request');
  });

  // Fails if, in src/oidc/authentication-checks.ts, the auth_time_in_future check is back inside
  // the max_age branch: a provider a day ahead, or writing milliseconds or microseconds, had its
  // auth_time recorded, meeting a route's stepUp.maxAgeSeconds for as long as that lasted.
  it('refuses an auth_time in the future beyond the tolerance, max_age asked or not', () => {
    expect(refused(() => checkAuthentication({ auth_time: NOW + 30 }, undefined, NOW, 30))).toBe('accepted');
    for (const authTime of [NOW + 31, NOW + 24 * 3600, NOW * 1000, NOW * 1_000_000]) {
      expect(refused(() => checkAuthentication({ auth_time: authTime }, undefined, NOW, 30))).toBe('invalid_request');
    }
  });
});
