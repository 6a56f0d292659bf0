/**
 * The sign-in and sign-out flows the browser goes through, on top of openid-client: the
 * authorization request, the code's redemption into a verified sign-in, and the provider's
 * logout URL. Each returns plain data and throws GatewayError only.
 */
import * as oidc from 'openid-client';
import type { OidcConfig } from '../config/schema.js';
import { GatewayError } from '../errors.js';
import { fromCallbackError } from './errors.js';
import { authorizationUrl, loginParameters, usePushedRequest, type AuthenticationAsked, type LoginParams } from './authorization-request.js';
import { checkAuthentication, type Authentication } from './authentication-checks.js';
import { verifyIdToken } from './id-token.js';
import { requireBearer, requireBound, tokenEndpointHandle, type TokenDpop } from './dpop.js';
import { granted, grantedScopes, MAX_ID_TOKEN_LENGTH, type Clock, type GrantedTokens } from './granted.js';
import type { ProviderState } from './client.js';

export interface AuthorizationRequest {
  url: string;
  state: string;
  nonce: string;
  codeVerifier: string;
}

export interface SignIn {
  tokens: GrantedTokens;
  claims: Record<string, unknown> & { sub: string; iss: string; iat: number; sid?: string };
  scopes: string[];
  /** The ID token's acr / auth_time, checked against what was asked. */
  authentication: Authentication;
}

/**
 * @param resources RFC 8707 resource indicators of the user routes: named at authorization so
 *   that the grant covers them and a refresh can later ask for a token per resource.
 */
export async function startAuthorization(
  provider: ProviderState,
  cfg: OidcConfig,
  redirectUri: string,
  resources: readonly string[] = [],
  login: LoginParams = {},
  /** RFC 9449 §10: the thumbprint of the session's DPoP key, binding the code to it. */
  dpopJkt?: string,
): Promise<AuthorizationRequest> {
  const pushed = usePushedRequest(cfg.pushedAuthorizationRequests, provider.metadata);
  const codeVerifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const asked = loginParameters(login, provider.metadata, cfg);
  // The SPA's acr request replaces a configured one whichever form it takes.
  const defaults = asked.claims ? Object.fromEntries(Object.entries(cfg.extraAuthParams).filter(([k]) => k !== 'acr_values')) : cfg.extraAuthParams;
  const params = new URLSearchParams({ ...defaults, ...asked });
  for (const [name, value] of Object.entries({
    response_type: 'code',
    scope: cfg.scopes.join(' '),
    redirect_uri: redirectUri,
    state,
    nonce,
    code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
    code_challenge_method: 'S256',
  })) {
    params.set(name, value);
  }
  for (const resource of resources) params.append('resource', resource);
  if (dpopJkt) params.set('dpop_jkt', dpopJkt);
  return { url: await authorizationUrl(provider.configuration, params, pushed), state, nonce, codeVerifier };
}

export async function completeAuthorization(
  provider: ProviderState,
  cfg: OidcConfig,
  callbackUrl: URL,
  tx: { state: string; nonce: string; codeVerifier: string; asked?: AuthenticationAsked },
  clock: Clock = Date.now,
  dpop?: TokenDpop,
): Promise<SignIn> {
  try {
    // RFC 9207 §2.4: openid-client rejects a mismatched `iss` (or a missing one when the
    // provider advertises it) before the code exchange.
    const response = await oidc.authorizationCodeGrant(provider.configuration, callbackUrl, {
      pkceCodeVerifier: tx.codeVerifier,
      expectedState: tx.state,
      expectedNonce: tx.nonce,
      idTokenExpected: true,
    }, undefined, dpop ? { DPoP: await tokenEndpointHandle(provider, dpop) } : undefined);
    if (dpop) requireBound(response, 'invalid_request');
    else requireBearer(response, 'invalid_request');
    if (!response.id_token) throw new GatewayError('invalid_request');
    if (response.id_token.length > MAX_ID_TOKEN_LENGTH) {
      throw new GatewayError('invalid_request', { description: 'The provider sent an ID token larger than the gateway keeps (64 KiB).' });
    }
    const payload = await verifyIdToken(response.id_token, provider.jwks, {
      issuer: provider.metadata.issuer,
      clientId: cfg.clientId,
      algorithms: cfg.idTokenSigningAlgs,
      clockToleranceSeconds: cfg.clockToleranceSeconds,
    });
    const authentication = checkAuthentication(payload, tx.asked, Math.floor(clock() / 1000), cfg.clockToleranceSeconds);
    const tokens = granted(response, clock);
    return { tokens, claims: payload as SignIn['claims'], scopes: grantedScopes(cfg.scopes, tokens), authentication };
  } catch (err) {
    throw fromCallbackError(err);
  }
}

/** RP-initiated logout URL, or undefined when the provider has no end_session_endpoint. */
export function endSessionUrl(
  provider: ProviderState,
  cfg: OidcConfig,
  idTokenHint: string | undefined,
  postLogoutRedirectUri: string,
): string | undefined {
  if (!provider.metadata.end_session_endpoint) return undefined;
  const params: Record<string, string> = { post_logout_redirect_uri: postLogoutRedirectUri, client_id: cfg.clientId };
  if (idTokenHint) params.id_token_hint = idTokenHint;
  return oidc.buildEndSessionUrl(provider.configuration, params).href;
}
