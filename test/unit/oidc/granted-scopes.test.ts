import { grantedScopes } from '../../../src/oidc/flows.js';

describe('the scopes a session holds', () => {
  const requested = ['openid', 'profile', 'email', 'offline_access', 'api:read', 'orders:write'];

  it("takes API scopes from the token response only, never from the request", () => {
    const scopes = grantedScopes(requested, { accessToken: 'a', refreshToken: 'r', scope: 'api:read' });
    expect(scopes).toEqual(expect.arrayContaining(['api:read', 'openid', 'profile', 'email', 'offline_access']));
    expect(scopes).not.toContain('orders:write');
  });

  it('claims offline_access only when a refresh token was issued', () => {
    expect(grantedScopes(requested, { accessToken: 'a', scope: 'openid' })).not.toContain('offline_access');
  });

  it('falls back to the requested scopes when the provider omits scope (RFC 6749 §5.1)', () => {
    expect(grantedScopes(['openid', 'api:read'], { accessToken: 'a' })).toEqual(['openid', 'api:read']);
  });
});
