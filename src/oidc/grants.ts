/**
 * The token grants the gateway makes once a user is signed in, or for itself: refresh, token
 * exchange (RFC 8693) and client credentials. Each returns plain data (granted.ts) and throws
 * GatewayError only.
 */
import * as oidc from 'openid-client';
import { GatewayError } from '../errors.js';
import { fromClientCredentialsError, fromExchangeError, fromRefreshError } from './errors.js';
import { requireBearer, requireBound, tokenEndpointHandle, type TokenDpop } from './dpop.js';
import { granted, type Clock, type GrantedTokens } from './granted.js';
import type { ProviderState } from './client.js';

/**
 * Refresh grant. A returned ID token must name the same subject (OIDC Core §12.2); otherwise
 * the session is ended (login_required).
 */
export async function refreshTokens(
  provider: ProviderState,
  current: GrantedTokens,
  expectedSub: string,
  params: Record<string, string> = {},
  clock: Clock = Date.now,
  dpop?: TokenDpop,
): Promise<GrantedTokens> {
  if (!current.refreshToken) throw new GatewayError('login_required');
  try {
    const response = await oidc.refreshTokenGrant(
      provider.configuration,
      current.refreshToken,
      params,
      dpop ? { DPoP: await tokenEndpointHandle(provider, dpop) } : undefined,
    );
    // A provider answering a refresh with a bearer token on a DPoP-bound session, or a bound
    // token on a bearer one: the set is unusable. Without a new refresh token, keep the session
    // and try again later; with one, the old one was rotated away (spent), so the grant cannot
    // go on: sign in again.
    const unusable = response.refresh_token ? 'login_required' : 'token_refresh_failed';
    if (dpop) requireBound(response, unusable);
    else requireBearer(response, unusable);
    const claims = response.claims();
    if (claims && claims.sub !== expectedSub) throw new GatewayError('login_required');
    return granted(response, clock, current);
  } catch (err) {
    throw fromRefreshError(err);
  }
}

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

export interface ExchangeRequest {
  audience: string;
  scope?: string;
  resource?: string;
}

/**
 * RFC 8693 §2.1: the session's access token (the subject) for one meant for another API. The
 * answer's `issued_token_type` must be an access token (§2.2.1) usable as a bearer token.
 */
export async function exchangeToken(
  provider: ProviderState,
  subjectToken: string,
  request: ExchangeRequest,
  clock: Clock = Date.now,
): Promise<GrantedTokens> {
  try {
    const response = await oidc.genericGrantRequest(provider.configuration, TOKEN_EXCHANGE_GRANT, {
      subject_token: subjectToken,
      subject_token_type: ACCESS_TOKEN_TYPE,
      requested_token_type: ACCESS_TOKEN_TYPE,
      audience: request.audience,
      ...(request.scope ? { scope: request.scope } : {}),
      ...(request.resource ? { resource: request.resource } : {}),
    });
    // An access token, labelled as such, as a JWT (RFC 8693 §3), or not labelled (lenient providers).
    if (response.issued_token_type !== undefined && response.issued_token_type !== ACCESS_TOKEN_TYPE && response.issued_token_type !== JWT_TOKEN_TYPE) {
      throw new GatewayError('token_refresh_failed', { description: 'The provider issued another kind of token than an access token.' });
    }
    requireBearer(response, 'token_refresh_failed', 'The provider issued an exchanged token that is not a bearer token.');
    // A lax or misconfigured provider echoing the subject token: the session's own, broader
    // token would go to the route's API, which the exchange is there to prevent.
    if (response.access_token === subjectToken) {
      throw new GatewayError('token_refresh_failed', { description: 'The provider answered the exchange with the subject token itself.' });
    }
    const { refreshToken: _none, idToken: _neither, ...tokens } = granted(response, clock);
    return tokens;
  } catch (err) {
    throw fromExchangeError(err);
  }
}

export async function clientCredentials(
  provider: ProviderState,
  params: Record<string, string>,
  clock: Clock = Date.now,
): Promise<GrantedTokens> {
  try {
    const response = await oidc.clientCredentialsGrant(provider.configuration, params);
    // Client tokens are sent as Bearer: a DPoP-bound one (issued without a proof) fails at the API.
    requireBearer(response, 'token_refresh_failed', 'The provider issued a client token that is not a bearer token.');
    return granted(response, clock);
  } catch (err) {
    throw fromClientCredentialsError(err);
  }
}
