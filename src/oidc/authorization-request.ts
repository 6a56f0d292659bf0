/**
 * What the authorization request carries besides the protocol basics (flows.ts): the login
 * parameters the SPA may pass through (OIDC Core §3.1.2.1, RFC 9470 §4), and how the request
 * reaches the provider: in the browser's URL, or pushed first (RFC 9126) so that the URL holds
 * only `client_id` and `request_uri`.
 */
import * as oidc from 'openid-client';
import type { OidcConfig } from '../config/schema.js';
import { GatewayError } from '../errors.js';
import { fromPushError } from './errors.js';

/** OIDC Core §3.1.2.1 prompt values, plus `create` (Initiating User Registration 1.0). */
export const PROMPT_VALUES = ['none', 'login', 'consent', 'select_account', 'create'] as const;
export type PromptValue = (typeof PROMPT_VALUES)[number];

/** Login parameters from the SPA, already validated (http/login-params.ts): canonical values. */
export interface LoginParams {
  prompt?: readonly PromptValue[];
  loginHint?: string;
  uiLocales?: readonly string[];
  acrValues?: readonly string[];
  /** Seconds. */
  maxAge?: number;
}

/** What the callback must find in the ID token, because the request asked for it. */
export interface AuthenticationAsked {
  /** The ID token's `acr` must be one of these (asked as essential). */
  acrValues?: string[];
  /** The ID token's `auth_time` must be present and no older than this many seconds. */
  maxAge?: number;
}

export function askedOf(params: LoginParams): AuthenticationAsked {
  return {
    ...(params.acrValues?.length ? { acrValues: [...params.acrValues] } : {}),
    ...(params.maxAge !== undefined ? { maxAge: params.maxAge } : {}),
  };
}

/**
 * The authorization parameters for `params`. They replace extraAuthParams of the same name: the
 * config's values are defaults, and a requirement that must hold is a route's `stepUp`, which
 * is judged on the session, not on what was asked.
 *
 * `acr_values` is a voluntary claim (OIDC Core §3.1.2.1): a provider may answer with another
 * acr. The gateway treats the SPA's acr values as essential (the callback refuses any other
 * `acr`), and when the provider supports the `claims` parameter it asks that way instead
 * (`{"id_token":{"acr":{"essential":true,"values":[...]}}}`, §5.5.1.1), so that the provider
 * prompts for a stronger authentication rather than answering with a weaker one. Not both:
 * oidc-provider lets `acr_values` replace the essential request with a voluntary one.
 */
export function loginParameters(params: LoginParams, metadata: Readonly<oidc.ServerMetadata>, cfg: OidcConfig): Record<string, string> {
  const out: Record<string, string> = {};
  if (params.prompt?.length) {
    if (params.prompt.includes('create') && !(metadata.prompt_values_supported as unknown[] | undefined)?.includes('create')) {
      throw new GatewayError('invalid_request', { description: 'The provider does not offer prompt=create.' });
    }
    out.prompt = params.prompt.join(' ');
  }
  if (params.loginHint !== undefined) out.login_hint = params.loginHint;
  if (params.uiLocales?.length) out.ui_locales = params.uiLocales.join(' ');
  if (params.maxAge !== undefined) out.max_age = String(params.maxAge);
  if (params.acrValues?.length) {
    if (metadata.claims_parameter_supported === true && cfg.extraAuthParams.claims === undefined) {
      out.claims = JSON.stringify({ id_token: { acr: { essential: true, values: params.acrValues } } });
    } else {
      out.acr_values = params.acrValues.join(' ');
    }
  }
  return out;
}

/**
 * Why `mode` cannot be served by this provider, or undefined. Told to operators at discovery
 * (runtime.ts), and answered as 503 at each login (usePushedRequest).
 */
export function pushedRequestMismatch(mode: OidcConfig['pushedAuthorizationRequests'], metadata: Readonly<oidc.ServerMetadata>): string | undefined {
  if (mode === 'always' && typeof metadata.pushed_authorization_request_endpoint !== 'string') {
    return 'The identity provider offers no pushed authorization requests, which this gateway is configured to use.';
  }
  if (mode === 'never' && metadata.require_pushed_authorization_requests === true) {
    return 'The identity provider requires pushed authorization requests, which this gateway is configured not to use.';
  }
  return undefined;
}

/**
 * Whether this login is pushed (RFC 9126 §5): `auto` follows the provider's metadata. A mode the
 * provider cannot serve fails the login with 503 and a sentence for operators, rather than
 * sending the browser to a provider error page.
 */
export function usePushedRequest(mode: OidcConfig['pushedAuthorizationRequests'], metadata: Readonly<oidc.ServerMetadata>): boolean {
  const mismatch = pushedRequestMismatch(mode, metadata);
  if (mismatch) throw new GatewayError('provider_unavailable', { description: mismatch });
  const offered = typeof metadata.pushed_authorization_request_endpoint === 'string';
  const required = metadata.require_pushed_authorization_requests === true;
  return mode === 'always' || (mode === 'auto' && (offered || required));
}

/**
 * The URL to send the browser to. Pushed: the whole request goes to the PAR endpoint with the
 * client's authentication, and the URL carries only `client_id` and `request_uri`.
 */
export async function authorizationUrl(configuration: oidc.Configuration, params: URLSearchParams, pushed: boolean): Promise<string> {
  if (!pushed) return oidc.buildAuthorizationUrl(configuration, params).href;
  try {
    return (await oidc.buildAuthorizationUrlWithPAR(configuration, params)).href;
  } catch (err) {
    throw fromPushError(err);
  }
}
