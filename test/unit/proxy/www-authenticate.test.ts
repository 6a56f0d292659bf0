/**
 * The WWW-Authenticate reader (RFC 9110 §11.6.1) and the step-up challenge it yields (RFC 9470
 * §3): several challenges, quoted strings with escapes, token68, junk and hostile input.
 *
 * Mutation that fails this file: in src/proxy/www-authenticate.ts readQuoted, drop the line
 * `if (c === '\\') i++;` (an escaped quote then ends the string early).
 */
import fc from 'fast-check';
import { parseWwwAuthenticate } from '../../../src/proxy/www-authenticate.js';
import { upstreamStepUp } from '../../../src/proxy/step-up.js';

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
