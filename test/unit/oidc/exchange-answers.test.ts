/**
 * What a provider's token-exchange answer may say (RFC 8693 §2.2.1, §3): an access token labelled
 * as one, as a JWT, or not labelled (lenient providers) is taken; a refresh token, an ID token or
 * a non-bearer token is not.
 *
 * Mutation check (by hand, once): src/oidc/grants.ts exchangeToken: drop
 * `&& response.issued_token_type !== JWT_TOKEN_TYPE` → the JWT-labelled answer is refused and the
 * first test fails.
 */
import { exchangeToken } from '../../../src/oidc/grants.js';
import { GatewayError } from '../../../src/errors.js';
import { json, providerAnswering } from '../../support/provider-answering.js';

const answer = (fields: Record<string, unknown>) => providerAnswering(() => json(200, { access_token: 'exchanged', token_type: 'Bearer', expires_in: 60, ...fields })).provider;
const exchange = (fields: Record<string, unknown>) => exchangeToken(answer(fields), 'subject', { audience: 'https://api.example' });

describe('exchangeToken', () => {
  it('takes an access token labelled as one, as a JWT, or not labelled', async () => {
    for (const label of ['urn:ietf:params:oauth:token-type:access_token', 'urn:ietf:params:oauth:token-type:jwt', undefined]) {
      const tokens = await exchange(label === undefined ? {} : { issued_token_type: label });
      expect(tokens.accessToken).toBe('exchanged');
    }
  });

  // Fails if, in src/oidc/granted.ts granted, `|| answered < 1` is removed: a token issued with
  // expires_in 0 was due again at once, and each call made three exchanges (grants, refreshes).
  it('reads an expires_in below one second as not stated (the exchanged token is then kept the default lifetime)', async () => {
    for (const expiresIn of [0, 0.5]) {
      const tokens = await exchange({ expires_in: expiresIn });
      expect(tokens).not.toHaveProperty('expiresAt');
      expect(tokens).not.toHaveProperty('lifetime');
    }
    expect(await exchange({ expires_in: 1 })).toMatchObject({ lifetime: 1 });
  });

  it('refuses another kind of token, or one that is not a bearer token', async () => {
    for (const fields of [{ issued_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' }, { issued_token_type: 'urn:ietf:params:oauth:token-type:id_token' }, { token_type: 'N_A' }]) {
      const err = await exchange(fields).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GatewayError);
      expect((err as GatewayError).code).toBe('token_refresh_failed');
    }
  });
});
