/**
 * DEV_IDP_ACCESS_TOKEN_TTL (the demo's access-token lifetime, src/dev/idp.ts): unset means the
 * provider's default; a whole number of seconds sets it; anything else stops the demo with a
 * message naming the variable rather than starting with a lifetime nobody asked for.
 *
 * Mutation check (by hand, once): drop the `seconds < 1` test and the '0' and '-5' cases fail.
 */
import { devTtlFromEnv } from '../../../src/dev/idp.js';

describe('devTtlFromEnv', () => {
  it('leaves the lifetimes alone when the variable is unset or empty', () => {
    expect(devTtlFromEnv({})).toEqual({});
    expect(devTtlFromEnv({ DEV_IDP_ACCESS_TOKEN_TTL: '' })).toEqual({});
  });

  it('sets the access-token lifetime in seconds', () => {
    expect(devTtlFromEnv({ DEV_IDP_ACCESS_TOKEN_TTL: '35' })).toEqual({ AccessToken: 35 });
  });

  it.each(['0', '-5', '1.5', 'ten', '1e400'])('refuses %p, naming the variable', (raw) => {
    expect(() => devTtlFromEnv({ DEV_IDP_ACCESS_TOKEN_TTL: raw })).toThrow(/DEV_IDP_ACCESS_TOKEN_TTL/);
  });
});
