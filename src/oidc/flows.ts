/**
 * The OAuth/OIDC calls the gateway makes, on top of openid-client. Each returns plain data
 * (TokenSet-shaped values) and throws GatewayError only.
 */
import * as oidc from 'openid-client';
import type { OidcConfig } from '../config/schema.js';
import { GatewayError } from '../errors.js';
import { fromCallbackError, fromClientCredentialsError, fromExchangeError, fromRefreshError } from './errors.js';
import { authorizationUrl, loginParameters, usePushedRequest, type AuthenticationAsked, type LoginParams } from './authorization-request.js';
import { checkAuthentication, type Authentication } from './authentication-checks.js';
import { verifyIdToken } from './id-token.js';
import { requireBearer, requireBound, tokenEndpointHandle, type TokenDpop } from './dpop.js';
import type { ProviderState } from './client.js';

export interface AuthorizationRequest {
  url: string;
  state: string;
  nonce: string;
  codeVerifier: string;
}

export interface GrantedTokens {
  accessToken: string;
  refreshToken?: string;
  idToken?: string;
  /** Epoch seconds. */
  expiresAt?: number;
  /** expires_in as read (whole seconds, capped): how long the token was issued for. */
  lifetime?: number;
  scope?: string;
}

export interface SignIn {
  tokens: GrantedTokens;
  claims: Record<string, unknown> & { sub: string; iss: string; iat: number; sid?: string };
  scopes: string[];
  /** The ID token's acr / auth_time, checked against what was asked. */
  authentication: Authentication;
}

/** Milliseconds since the epoch; injected so expiry can be tested without waiting. */
export type Clock = () => number;

/**
 * Longer than any access token is meant to live. A provider's `expires_in` is read as whole
 * seconds up to this: oauth4webapi accepts any non-negative number, and a lifetime of 1e300 made
 * every later use of it fail (Redis refuses such an EX: no client token was ever cached, each
 * call a new grant and a 503). Below one second (0 included) it is read as not stated (RFC 6749
 * §5.1 leaves the lifetime to the server then): a token that expires as it is issued was due
 * again at once, one grant or refresh per call (three per call, with the renewal rounds).
 */
export const MAX_TOKEN_LIFETIME_SECONDS = 366 * 24 * 3600;

/**
 * The longest ID token a sign-in takes (characters of its compact form). The session record
 * holds it and its visible claims, read whole on every call and cached per session: a profile
 * field a user may set (a 300 KB name) made a record of almost 1 MB, and 100 sessions of it
 * 300 MB of gateway memory. Real ID tokens stay far below (a few KiB; Entra ID's groups
 * overage keeps them under about 10 KiB).
 */
export const MAX_ID_TOKEN_LENGTH = 64 * 1024;

function granted(
  response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
  clock: Clock,
  previous?: GrantedTokens,
): GrantedTokens {
  const answered = response.expiresIn();
  const expiresIn = answered === undefined || answered < 1 ? undefined : Math.min(Math.floor(answered), MAX_TOKEN_LIFETIME_SECONDS);
  // A refresh's ID token serves only as the logout's id_token_hint: one past the limit (a
  // profile field grown since sign-in) is not kept, the sign-in's goes on serving.
  const idToken = response.id_token !== undefined && response.id_token.length <= MAX_ID_TOKEN_LENGTH ? response.id_token : previous?.idToken;
  return {
    accessToken: response.access_token,
    // RFC 6749 §6: keep the old refresh token when the provider issues none.
    ...(response.refresh_token ?? previous?.refreshToken ? { refreshToken: response.refresh_token ?? previous?.refreshToken } : {}),
    ...(idToken ? { idToken } : {}),
    ...(expiresIn !== undefined ? { expiresAt: Math.floor(clock() / 1000) + expiresIn, lifetime: expiresIn } : {}),
    // `""` grants no scope (oidc-provider answers so for a resource whose scopes were all
    // declined); only an absent scope means the one asked for (RFC 6749 §5.1), or kept (§6).
    ...(response.scope !== undefined ? { scope: response.scope } : previous?.scope !== undefined ? { scope: previous.scope } : {}),
  };
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

/**
 * The scopes the session holds, which route scopes are checked against (SPEC §4): the token
 * response's `scope`, and only when it is absent the scopes requested (RFC 6749 §5.1: the
 * provider MUST list the scope when it differs from the request). `openid` is added back: the
 * verified ID token proves it. Nothing else is inferred: a provider that drops `email` (the
 * user unticked it) or, like oidc-provider with a resource indicator, lists only the access
 * token's resource scopes, is taken at its word.
 */
export function grantedScopes(requested: readonly string[], tokens: GrantedTokens): string[] {
  const scopes = new Set((tokens.scope ?? requested.join(' ')).split(' ').filter(Boolean));
  scopes.add('openid');
  return [...scopes];
}

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

/** At most this many further access tokens (resource and exchanged ones) are revoked per session. */
export const MAX_EXTRA_REVOCATIONS = 16;

/**
 * RFC 7009, best effort: the refresh token first (revoking it ends the grant at most
 * providers), then the access token and `extraAccessTokens` (RFC 8707 resource tokens, RFC 8693
 * exchanged tokens: a provider that does not tie them to the grant would let them live on),
 * those at once, so that the whole takes at most two provider timeouts whatever their number.
 * Duplicates are sent once, and at most MAX_EXTRA_REVOCATIONS extra tokens. Never retried (a
 * failure is reported to `onError`). Resolves to the number of failed calls.
 */
export async function revokeTokens(
  provider: ProviderState,
  tokens: GrantedTokens,
  onError: (err: unknown) => void,
  extraAccessTokens: readonly string[] = [],
): Promise<number> {
  if (!provider.metadata.revocation_endpoint) return 0;
  let failures = 0;
  const revoke = async (token: string, hint: string) => {
    try {
      await oidc.tokenRevocation(provider.configuration, token, { token_type_hint: hint });
    } catch (err) {
      // RFC 7009 §2.2.1: providers answer this for self-contained (JWT) access tokens, which
      // they cannot revoke; the refresh token's revocation already ended the grant.
      if (err instanceof oidc.ResponseBodyError && err.error === 'unsupported_token_type') return;
      failures += 1;
      onError(err);
    }
  };
  if (tokens.refreshToken) await revoke(tokens.refreshToken, 'refresh_token');
  const access = [...new Set([tokens.accessToken, ...extraAccessTokens.slice(0, MAX_EXTRA_REVOCATIONS)])];
  await Promise.all(access.map((token) => revoke(token, 'access_token')));
  return failures;
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
