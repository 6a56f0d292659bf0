import { grantedScopes } from '../../../src/oidc/granted.js';

describe('the scopes a session holds', () => {
  const requested = ['openid', 'profile', 'email', 'offline_access', 'api:read', 'orders:write'];

  it('takes the scopes from the token response only, never from the request', () => {
    const scopes = grantedScopes(requested, { accessToken: 'a', refreshToken: 'r', scope: 'api:read' });
    expect(scopes.sort()).toEqual(['api:read', 'openid']);
  });

  it('does not add an identity scope the provider left out (the user declined email)', () => {
    expect(grantedScopes(requested, { accessToken: 'a', scope: 'openid profile offline_access' })).not.toContain('email');
  });

  it('keeps openid, which the verified ID token proves, even when the response lists only API scopes', () => {
    expect(grantedScopes(['openid', 'orders:read'], { accessToken: 'a', scope: 'orders:read' })).toContain('openid');
  });

  it('claims offline_access only when the provider lists it', () => {
    expect(grantedScopes(requested, { accessToken: 'a', refreshToken: 'r', scope: 'openid' })).not.toContain('offline_access');
  });

  it('falls back to the requested scopes when the provider omits scope (RFC 6749 §5.1)', () => {
    expect(grantedScopes(['openid', 'api:read'], { accessToken: 'a' })).toEqual(['openid', 'api:read']);
  });
});
