/**
 * GET /auth/login's query parsed into canonical values (SPEC §3): the allow-list and each value's
 * syntax. The integration test (test/integration/auth/login-params.test.ts) shows the same
 * through the gateway; this one covers the edges.
 *
 * Mutation that fails this file: in src/http/login-params.ts, change
 * `if (list.includes('none') && list.length > 1)` to `if (false)`.
 */
import fc from 'fast-check';
import { GatewayError } from '../../../src/errors.js';
import { parseLoginQuery } from '../../../src/http/login-params.js';

/** A record's values as parameters, an array's each given in turn (a repeated parameter). */
const q = (query: Record<string, string | string[]>) =>
  new URLSearchParams(Object.entries(query).flatMap(([name, v]) => (Array.isArray(v) ? v : [v]).map((one): [string, string] => [name, one])));

const code = (query: Record<string, string | string[]> | string) => {
  try {
    parseLoginQuery(typeof query === 'string' ? new URLSearchParams(query) : q(query));
    return 'ok';
  } catch (err) {
    return err instanceof GatewayError ? err.code : 'crash';
  }
};

describe('parseLoginQuery', () => {
  it('returns canonical values', () => {
    expect(
      parseLoginQuery(q({ returnTo: '/x', prompt: 'login consent login', login_hint: 'alice@example.com', ui_locales: 'en-GB de', acr_values: 'urn:a urn:a urn:b', max_age: '0' })),
    ).toEqual({
      returnTo: '/x',
      params: { prompt: ['login', 'consent'], loginHint: 'alice@example.com', uiLocales: ['en-GB', 'de'], acrValues: ['urn:a', 'urn:b'], maxAge: 0 },
    });
    expect(parseLoginQuery(new URLSearchParams())).toEqual({ returnTo: undefined, params: {} });
  });

  it.each([
    [{ prompt: 'none login' }],
    [{ prompt: '' }],
    [{ prompt: 'Login' }],
    [{ max_age: '01' }],
    [{ max_age: '' }],
    [{ max_age: '1e3' }],
    [{ max_age: String(367 * 24 * 3600) }],
    [{ acr_values: ' urn:a' }],
    [{ acr_values: 'urn:a\tb' }],
    [{ acr_values: 'x'.repeat(201) }],
    [{ login_hint: '' }],
    [{ login_hint: 'a b' }],
    [{ ui_locales: 'en--GB' }],
    [{ ui_locales: Array(11).fill('en').join(' ') }],
    [{ acr_values: ['a', 'b'] }],
    ['prompt=login&prompt=login'],
    ['prompt[x]=login'],
    [{ claims: '{}' }],
    [{ request_uri: 'urn:x' }],
  ])('refuses %j with invalid_request', (query) => {
    expect(code(query)).toBe('invalid_request');
  });

  it('refuses a returnTo longer than 2048 as invalid_return_to', () => {
    expect(code({ returnTo: `/${'a'.repeat(2048)}` })).toBe('invalid_return_to');
  });

  it('answers any query with a result or a 4xx GatewayError, never a crash', () => {
    const names = fc.constantFrom('returnTo', 'prompt', 'login_hint', 'ui_locales', 'acr_values', 'max_age', 'scope', '__proto__');
    fc.assert(
      fc.property(fc.dictionary(names, fc.oneof(fc.string({ maxLength: 40, unit: 'binary' }), fc.array(fc.string(), { maxLength: 2 }))), (query) => {
        expect(['ok', 'invalid_request', 'invalid_return_to']).toContain(code(query));
        expect(['ok', 'invalid_request', 'invalid_return_to']).toContain(code(q(query).toString()));
      }),
      { numRuns: 1000 },
    );
  });
});
