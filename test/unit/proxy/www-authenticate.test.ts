/**
 * The WWW-Authenticate reader (RFC 9110 §11.6.1) and the step-up challenge it yields (RFC 9470
 * §3): several challenges, quoted strings with escapes, token68, junk and hostile input.
 *
 * Mutation that fails this file: in src/proxy/www-authenticate.ts readQuoted, drop the line
 * `if (c === '\\') i++;` (an escaped quote then ends the string early). And `&& !spacedName` →
 * `` (a comma required between parameters, as 0.5.0 had it): "takes parameters a lenient
 * upstream wrote without the comma" fails.
 */
import fc from 'fast-check';
import { parseWwwAuthenticate } from '../../../src/proxy/www-authenticate.js';
import { stepUpChallenge, upstreamStepUp } from '../../../src/proxy/step-up.js';

describe('parseWwwAuthenticate', () => {
  it('reads a Bearer challenge with quoted and token parameters', () => {
    expect(parseWwwAuthenticate('Bearer realm="api", error="insufficient_user_authentication", max_age=300')).toEqual([
      { scheme: 'bearer', params: { realm: 'api', error: 'insufficient_user_authentication', max_age: '300' } },
    ]);
  });

  it('reads several challenges, token68 included, and header lines joined or as a list', () => {
    const expected = [
      { scheme: 'basic', params: {} },
      { scheme: 'newauth', params: { realm: 'apps', type: '1', title: 'Login to "apps"' } },
      { scheme: 'bearer', params: { error: 'x' } },
    ];
    expect(parseWwwAuthenticate('Basic YWxhZGRpbjpvcGVuc2VzYW1l==, Newauth realm="apps", type=1, title="Login to \\"apps\\"", Bearer error=x')).toEqual(expected);
    expect(parseWwwAuthenticate(['Basic YWxhZGRpbjpvcGVuc2VzYW1l==', 'Newauth realm="apps", type=1, title="Login to \\"apps\\""', 'Bearer error=x'])).toEqual(expected);
  });

  it('takes parameters a lenient upstream wrote without the comma between them', () => {
    expect(parseWwwAuthenticate('Bearer realm="api" error="invalid_token"')).toEqual([{ scheme: 'bearer', params: { realm: 'api', error: 'invalid_token' } }]);
    expect(parseWwwAuthenticate('Bearer error=insufficient_user_authentication acr_values="urn:mfa", Basic realm=x')).toEqual([
      { scheme: 'bearer', params: { error: 'insufficient_user_authentication', acr_values: 'urn:mfa' } },
      { scheme: 'basic', params: { realm: 'x' } },
    ]);
  });

  it('lowercases schemes and parameter names; the first of a repeated parameter wins', () => {
    expect(parseWwwAuthenticate('BEARER Error="a", ERROR="b"')).toEqual([{ scheme: 'bearer', params: { error: 'a' } }]);
  });

  it.each([
    ['an unterminated quoted string', 'Bearer error="insufficient_user_authentication', [{ scheme: 'bearer', params: {} }]],
    ['a parameter before any scheme', 'realm="x"', []],
    ['a control character in a quoted string', 'Bearer a="x\u0001y", error=z', [{ scheme: 'bearer', params: {} }]],
    ['a value that is not a token', 'Bearer error=urn:x, max_age=5', [{ scheme: 'bearer', params: {} }]],
    ['nothing at all', '', []],
    ['only commas and spaces', ' , ,, ', []],
  ])('stops at junk (%s), keeping what came before', (_what, header, expected) => {
    expect(parseWwwAuthenticate(header)).toEqual(expected);
  });

  it('ignores a header past 8 KiB', () => {
    expect(parseWwwAuthenticate(`Bearer error="${'a'.repeat(9000)}"`)).toEqual([]);
  });

  it('never throws and returns few challenges whatever the input', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300, unit: 'binary' }), (header) => {
        const parsed = parseWwwAuthenticate(header);
        expect(parsed.length).toBeLessThanOrEqual(16);
        for (const c of parsed) expect(c.scheme).toMatch(/^[a-z0-9!#$%&'*+\-.^_`|~]+$/);
      }),
      { numRuns: 2000 },
    );
  });

  it('reads back any quoted value it is given, escapes included', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }).filter((s) => !/[\u0000-\u0008\u000a-\u001f\u007f]/.test(s)), (value) => {
        const quoted = `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
        expect(parseWwwAuthenticate(`Bearer realm=${quoted}, error=e`)).toEqual([{ scheme: 'bearer', params: { realm: value, error: 'e' } }]);
      }),
    );
  });
});

describe('upstreamStepUp', () => {
  it('finds the insufficient_user_authentication challenge among others', () => {
    expect(upstreamStepUp('Basic realm="x", Bearer realm="api", error="insufficient_user_authentication", acr_values="urn:a urn:b", max_age=60')).toEqual({
      acrValues: ['urn:a', 'urn:b'],
      maxAge: 60,
    });
  });

  it('ignores other Bearer errors and other schemes carrying that error', () => {
    expect(upstreamStepUp('Bearer error="invalid_token"')).toBeUndefined();
    expect(upstreamStepUp('DPoPish error="insufficient_user_authentication"')).toBeUndefined();
    expect(upstreamStepUp(undefined)).toBeUndefined();
  });

  it.each([
    ['acr_values with a quote', 'acr_values="a\\"b"', {}],
    ['acr_values with angle brackets', 'acr_values="<script>"', {}],
    ['too many acr_values', 'acr_values="a b c d e f g h i"', {}],
    ['a negative max_age', 'max_age=-1', {}],
    ['a huge max_age', 'max_age=99999999999', {}],
    ['a max_age with a sign', 'max_age="+5"', {}],
  ])('leaves out %s', (_what, param, expected) => {
    expect(upstreamStepUp(`Bearer error="insufficient_user_authentication", ${param}`)).toEqual(expected);
  });
});

// Issue 15 follow-up: RFC 9470 works with any token scheme, and a DPoP route's upstream
// challenges in the DPoP scheme (RFC 9449 §7.1).
// Mutation that fails this block: in src/proxy/step-up.ts, make STEP_UP_SCHEMES
// `new Set(['bearer'])` (a DPoP challenge is then passed through as a plain 401).
describe('upstreamStepUp in the DPoP scheme', () => {
  it('maps a DPoP insufficient_user_authentication challenge', () => {
    expect(upstreamStepUp('DPoP error="insufficient_user_authentication", acr_values="urn:a", max_age=30, algs="ES256"')).toEqual({
      acrValues: ['urn:a'],
      maxAge: 30,
    });
    expect(upstreamStepUp(['Basic realm="x"', 'dpop algs="ES256 PS256", error=insufficient_user_authentication, max_age=0'])).toEqual({ maxAge: 0 });
  });

  it('reads several challenges in one header (DPoP …, Bearer …) and prefers the scheme the token went in', () => {
    const both =
      'DPoP algs="ES256", error="insufficient_user_authentication", acr_values="urn:dpop", ' +
      'Bearer realm="api", error="insufficient_user_authentication", acr_values="urn:bearer"';
    expect(upstreamStepUp(both, 'dpop')).toEqual({ acrValues: ['urn:dpop'] });
    expect(upstreamStepUp(both, 'bearer')).toEqual({ acrValues: ['urn:bearer'] });
    expect(upstreamStepUp(both)).toEqual({ acrValues: ['urn:dpop'] });
    // Only the Bearer one is a step-up challenge: found whatever the preference.
    expect(upstreamStepUp('DPoP algs="ES256", error="invalid_token", Bearer error="insufficient_user_authentication", max_age=5', 'dpop')).toEqual({ maxAge: 5 });
    // A DPoP use_dpop_nonce next to nothing else is no step-up.
    expect(upstreamStepUp('DPoP error="use_dpop_nonce", error_description="nonce"', 'dpop')).toBeUndefined();
  });

  it("cannot add a parameter to loginUrl: an acr value's & and = stay inside acr_values", () => {
    const ask = upstreamStepUp('DPoP error="insufficient_user_authentication", acr_values="a&returnTo=//evil.example&prompt=none"') ?? {};
    const url = new URL(stepUpChallenge(ask, '/auth', '/pay').loginUrl, 'https://gw.example');
    expect([...url.searchParams.keys()]).toEqual(['acr_values', 'returnTo']);
    expect(url.searchParams.get('returnTo')).toBe('/pay');
    expect(url.searchParams.get('acr_values')).toBe('a&returnTo=//evil.example&prompt=none');
  });

  it('keeps only the /auth/login forms whatever the scheme (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('Bearer', 'DPoP', 'bearer', 'dpop', 'DPOP'),
        fc.string({ maxLength: 300 }),
        fc.string({ maxLength: 20 }),
        (scheme, acr, maxAge) => {
          const quote = (v: string) => `"${v.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
          const ask = upstreamStepUp(`${scheme} error="insufficient_user_authentication", acr_values=${quote(acr)}, max_age=${quote(maxAge)}`);
          if (ask === undefined) {
            // Only a value the quoted-string cannot carry (a control character) ends the parse.
            expect(/[\u0000-\u0008\u000a-\u001f\u007f]/.test(acr + maxAge)).toBe(true);
            return;
          }
          for (const value of ask.acrValues ?? []) expect(value).toMatch(/^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]{1,200}$/);
          expect(ask.acrValues?.length ?? 0).toBeLessThanOrEqual(8);
          if (ask.maxAge !== undefined) expect(String(ask.maxAge)).toBe(maxAge);
        },
      ),
    );
  });
});
