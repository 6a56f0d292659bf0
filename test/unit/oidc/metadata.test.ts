import { insecureEndpoints } from '../../../src/oidc/metadata.js';

const https = new URL('https://idp.example');
const loopback = new URL('http://127.0.0.1:4000');

function metadata(issuer: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    issuer,
    authorization_endpoint: `${issuer}/auth`,
    token_endpoint: `${issuer}/token`,
    userinfo_endpoint: `${issuer}/me`,
    jwks_uri: `${issuer}/jwks`,
    revocation_endpoint: `${issuer}/token/revocation`,
    end_session_endpoint: `${issuer}/session/end`,
    scopes_supported: ['openid'],
    service_documentation: 'http://docs.idp.example/', // documentation, not called: left alone
    ...overrides,
  };
}

describe('provider metadata endpoints', () => {
  it('accepts https endpoints under an https issuer', () => {
    expect(insecureEndpoints(https, metadata('https://idp.example'))).toEqual([]);
  });

  it.each([
    'jwks_uri',
    'authorization_endpoint',
    'token_endpoint',
    'userinfo_endpoint',
    'revocation_endpoint',
    'end_session_endpoint',
    'introspection_endpoint',
    'pushed_authorization_request_endpoint',
    'registration_endpoint',
    'device_authorization_endpoint',
    'backchannel_authentication_endpoint',
    'check_session_iframe',
  ])('refuses an http %s under an https issuer', (field) => {
    expect(insecureEndpoints(https, metadata('https://idp.example', { [field]: 'http://idp.example/x' }))).toEqual([field]);
  });

  it('refuses an http loopback endpoint under an https issuer, and an unparsable one', () => {
    expect(insecureEndpoints(https, metadata('https://idp.example', { jwks_uri: 'http://127.0.0.1/jwks', token_endpoint: 'not a url' })).sort()).toEqual([
      'jwks_uri',
      'token_endpoint',
    ]);
  });

  it('refuses http mTLS endpoint aliases (RFC 8705 §5)', () => {
    const aliases = { token_endpoint: 'http://mtls.idp.example/token', revocation_endpoint: 'https://mtls.idp.example/revoke' };
    expect(insecureEndpoints(https, metadata('https://idp.example', { mtls_endpoint_aliases: aliases }))).toEqual([
      'mtls_endpoint_aliases.token_endpoint',
    ]);
  });

  it('accepts http only for loopback endpoints of a loopback issuer (development and tests)', () => {
    expect(insecureEndpoints(loopback, metadata('http://127.0.0.1:4000'))).toEqual([]);
    expect(insecureEndpoints(loopback, metadata('http://127.0.0.1:4000', { jwks_uri: 'http://keys.example/jwks' }))).toEqual(['jwks_uri']);
  });
});
