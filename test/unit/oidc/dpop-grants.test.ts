/**
 * Token requests with a DPoP proof (src/oidc/grants.ts + src/oidc/dpop.ts): openid-client runs
 * for real, only its transport is a function answering what a provider would. A nonce the
 * provider asks for is sent on the one retry; the shared nonce is sent from the start; a nonce
 * refused twice keeps the session (502, not an ended grant); a bearer answer is refused.
 *
 * Mutation that fails it (checked by hand): in src/oidc/errors.ts, drop `|| error ===
 * 'use_dpop_nonce'` from the transient case: a twice-refused nonce ends the session. And in
 * src/oidc/grants.ts refreshTokens, `response.refresh_token ? 'login_required' :
 * 'token_refresh_failed'` → `'token_refresh_failed'`: "refuses a bearer token…" fails (the session
 * would keep a refresh token the provider had rotated away).
 */
import { decodeJwt } from 'jose';
import { refreshTokens } from '../../../src/oidc/grants.js';
import { ISSUER, json, providerAnswering } from '../../support/provider-answering.js';
import { GatewayError } from '../../../src/errors.js';
import { generateDpopKey, jwkThumbprint } from '../../../src/crypto/dpop.js';

const nonces = (value?: string) => ({ get: async () => value });
const tokens = { access_token: 'new-at', token_type: 'DPoP', expires_in: 60 };

describe('token requests with a DPoP proof', () => {
  it('retries once with the nonce the provider asked for, with a proof of the session key', async () => {
    const key = generateDpopKey();
    const { provider, proofs } = providerAnswering((proof) =>
      decodeJwt(proof ?? '').nonce === 'n-1' ? json(200, tokens) : json(400, { error: 'use_dpop_nonce' }, { 'dpop-nonce': 'n-1' }),
    );
    const got = await refreshTokens(provider, { accessToken: 'a', refreshToken: 'r' }, 'alice', {}, Date.now, { key, nonces: nonces() });
    expect(got.accessToken).toBe('new-at');
    expect(proofs).toHaveLength(2);
    const claims = decodeJwt(proofs[1] ?? '');
    expect(claims).toMatchObject({ htm: 'POST', htu: `${ISSUER}/token`, nonce: 'n-1' });
    expect(claims.ath).toBeUndefined();
    expect(JSON.parse(Buffer.from((proofs[1] ?? '').split('.')[0] ?? '', 'base64url').toString()).jwk.x).toBe(key.x);
    expect(jwkThumbprint(key)).toHaveLength(43);
  });

  it('sends the shared nonce from the start: one request', async () => {
    const { provider, proofs } = providerAnswering((proof) =>
      decodeJwt(proof ?? '').nonce === 'shared' ? json(200, tokens) : json(400, { error: 'use_dpop_nonce' }, { 'dpop-nonce': 'shared' }),
    );
    await refreshTokens(provider, { accessToken: 'a', refreshToken: 'r' }, 'alice', {}, Date.now, { key: generateDpopKey(), nonces: nonces('shared') });
    expect(proofs).toHaveLength(1);
  });

  it('keeps the session when the provider refuses the nonce even after the retry (502, not an ended grant)', async () => {
    const { provider, proofs } = providerAnswering(() => json(400, { error: 'use_dpop_nonce' }, { 'dpop-nonce': `n-${Math.random()}` }));
    const err = await refreshTokens(provider, { accessToken: 'a', refreshToken: 'r' }, 'alice', {}, Date.now, { key: generateDpopKey(), nonces: nonces() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe('token_refresh_failed');
    expect(proofs).toHaveLength(2);
  });

  it('refuses a bearer token in answer to a proof; a rotated refresh token in it means the grant cannot go on', async () => {
    const rotated = providerAnswering(() => json(200, { ...tokens, token_type: 'Bearer', refresh_token: 'r2' }));
    const spent = await refreshTokens(rotated.provider, { accessToken: 'a', refreshToken: 'r' }, 'alice', {}, Date.now, { key: generateDpopKey(), nonces: nonces() }).catch((e: unknown) => e);
    expect((spent as GatewayError).code).toBe('login_required');
    const { provider } = providerAnswering(() => json(200, { ...tokens, token_type: 'Bearer' }));
    const err = await refreshTokens(provider, { accessToken: 'a', refreshToken: 'r' }, 'alice', {}, Date.now, { key: generateDpopKey(), nonces: nonces() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe('token_refresh_failed');
  });
});
