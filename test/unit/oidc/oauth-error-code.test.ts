/**
 * oauthErrorCode (src/oidc/errors.ts): the code word of a provider's `error`, never the text
 * around it. Mutation (checked by hand): the regex's trailing `(?:$|[^...])` dropped → the
 * `invalid_grantAbc…` case fails.
 */
import { oauthErrorCode } from '../../../src/oidc/errors.js';

it.each([
  ['invalid_grant', 'invalid_grant'],
  ['invalid_grant: refresh token 8xK_zQ-1 is not active', 'invalid_grant'],
  ['invalid_client secret s3cr3t', 'invalid_client'],
  ['invalid_grantAbcDEF123', undefined],
  ['invalid_grant-8xKzQ', undefined],
  ['Invalid_grant', undefined],
  ['8xK_zQ', undefined],
  ['', undefined],
  ['a'.repeat(65), undefined],
  [42, undefined],
])('%j → %j', (value, code) => {
  expect(oauthErrorCode(value)).toBe(code);
});
