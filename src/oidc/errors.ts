/**
 * The only file that knows openid-client's and jose's error classes. Failures are classified by
 * typed fields (`ResponseBodyError.error`/`.status`, the HTTP status of a non-conforming
 * answer), never by message text, and the provider's own words never reach the browser: they
 * stay in `cause`, for the log.
 */
import { errors as joseErrors } from 'jose';
import { AuthorizationResponseError, ClientError, ResponseBodyError, WWWAuthenticateChallengeError } from 'openid-client';
import { GatewayError, isErrorCodeName } from '../errors.js';
import { ANSWER_TOO_LARGE } from './bounded-fetch.js';

/**
 * What a failed token-endpoint call (refresh or client credentials) says:
 * - `grant_ended`: `invalid_grant`, or any other 400 (RFC 6749 §5.2), even without a JSON
 *   body: the refresh token will not work again, so retrying only hammers the provider.
 * - `client_rejected`: `invalid_client` (any status), `invalid_dpop_proof`, or a bare 401: the gateway's own
 *   credentials are refused. Not the user's fault: the session is kept, operators must act.
 * - `request_refused`: `invalid_target` / `invalid_scope` (RFC 8707 §2, RFC 6749 §5.2): the
 *   gateway asked for a resource or scope the grant does not cover (a route's configuration);
 *   the grant itself still works, so the session is kept and operators must act.
 * - `transient`: 5xx, 429, `temporarily_unavailable`, `use_dpop_nonce`, timeouts, network errors, unreadable
 *   200s: try again later with the same refresh token.
 */
export type GrantFailure = 'grant_ended' | 'client_rejected' | 'request_refused' | 'transient';

interface ProviderAnswer {
  status?: number;
  error?: string;
}

/**
 * The OAuth error code in a provider's `error` (or the callback's): its leading code word,
 * `[a-z_]`, at most 64 characters and standing alone; undefined if it has none. RFC 6749 §5.2
 * lets `error` be any printable text, and a provider that writes a sentence quoting what it was
 * sent ("invalid_grant: refresh token … is not active") put the refresh token, the code and
 * its verifier, or the client secret into the log lines that name it (found by red team).
 */
export function oauthErrorCode(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  return /^([a-z_]{1,64})(?:$|[^A-Za-z0-9_.~+/=-])/.exec(value)?.[1];
}

/** What the log and the classification read for an `error` that holds no code word. */
const NONSTANDARD = 'nonstandard_error';

/** The HTTP status and OAuth error code of the provider's answer, when there was one. */
function providerAnswer(err: unknown): ProviderAnswer {
  if (err instanceof GatewayError) return providerAnswer(err.cause);
  if (err instanceof ResponseBodyError) return { status: err.status, error: oauthErrorCode(err.error) ?? NONSTANDARD };
  if (err instanceof WWWAuthenticateChallengeError) {
    // RFC 6750 §3 / RFC 6749 §5.2: the code may be in the challenge's `error` parameter.
    const error = err.cause.map((c) => c.parameters.error).find((e) => typeof e === 'string');
    return { status: err.status, ...(error ? { error: oauthErrorCode(error) ?? NONSTANDARD } : {}) };
  }
  // An answer that is not an OAuth error body: openid-client throws a ClientError whose cause
  // is the Response itself, with code OAUTH_RESPONSE_IS_NOT_JSON for a 4xx that is not
  // application/json (an empty body included) and OAUTH_RESPONSE_IS_NOT_CONFORM otherwise
  // (JSON without `error`, and every 5xx: oauth4webapi reads error bodies of 4xx only).
  if (err instanceof ClientError && err.cause instanceof Response) return { status: err.cause.status };
  return {};
}

export function classifyGrantFailure(err: unknown): GrantFailure {
  // Already decided (e.g. a refreshed ID token naming another subject, OIDC Core §12.2).
  if (err instanceof GatewayError && err.code === 'login_required') return 'grant_ended';
  const { status, error } = providerAnswer(err);
  if (error === 'invalid_client' || (status === 401 && error === undefined)) return 'client_rejected';
  if (error === 'invalid_grant') return 'grant_ended';
  // RFC 9449 §8: a nonce the provider refused even after openid-client's one retry (it rotated
  // meanwhile) says nothing about the grant: try again later with the same refresh token.
  if (error === 'temporarily_unavailable' || error === 'use_dpop_nonce') return 'transient';
  // A proof the provider does not accept (clock skew, algorithm): the gateway's side, not the user's.
  if (error === 'invalid_dpop_proof') return 'client_rejected';
  if (error === 'invalid_target' || error === 'invalid_scope') return 'request_refused';
  if (status === 400) return 'grant_ended';
  return 'transient';
}

/**
 * A refused push (RFC 9126 §2.3: e.g. invalid_request for a parameter the provider will not
 * take) is the request's fault: 400, whether or not the refusal came as a JSON error body.
 * Anything else (the gateway's own client refused, rate limits, network, timeout, 5xx) is the
 * provider's.
 */
export function fromPushError(err: unknown): GatewayError {
  const { status, error } = providerAnswer(err);
  const refusedRequest =
    status !== undefined && status >= 400 && status < 500 && error !== 'invalid_client' && (error !== undefined || (status !== 401 && status !== 429));
  return refusedRequest
    ? new GatewayError('invalid_request', { cause: err, description: 'The identity provider refused this sign-in request.' })
    : new GatewayError('provider_unavailable', { cause: err });
}

/** A refresh failed: a grant that ended ends the session (login_required), anything else keeps it. */
export function fromRefreshError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const failure = classifyGrantFailure(err);
  return new GatewayError(failure === 'grant_ended' ? 'login_required' : 'token_refresh_failed', { cause: err });
}

/** A client-credentials grant failed: there is no session to end, whatever the provider said. */
export function fromClientCredentialsError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  return new GatewayError('token_refresh_failed', { cause: err });
}

/**
 * A token exchange (RFC 8693) failed. The provider refusing this exchange (any 400:
 * `invalid_target` for an audience the policy does not allow, `invalid_scope`, `invalid_grant`
 * for a subject token it no longer accepts) is not a reason to end the session, whose own
 * grant still works: 403 insufficient_scope for this API only. Anything else (5xx, timeouts,
 * the gateway's own credentials refused) is 502 token_refresh_failed, to try again later.
 */
export function fromExchangeError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const failure = classifyGrantFailure(err);
  if (failure === 'grant_ended' || failure === 'request_refused') {
    return new GatewayError('insufficient_scope', {
      cause: err,
      description: 'The provider refused to issue a token for this API to this session.',
    });
  }
  return new GatewayError('token_refresh_failed', { cause: err });
}

/** The code exchange or ID token validation at the callback failed. */
export function fromCallbackError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  // openid-client has retried once with the nonce the provider sent (RFC 9449 §8); asked for one
  // again, the provider is not working as DPoP says: its fault, not the sign-in's.
  // Asked in the body or in a WWW-Authenticate challenge (openid-client retries on either).
  if (providerAnswer(err).error === 'use_dpop_nonce') return new GatewayError('provider_unavailable', { cause: err });
  if (err instanceof AuthorizationResponseError || err instanceof ResponseBodyError) {
    return new GatewayError('invalid_request', {
      cause: err,
      description: 'The sign-in could not be completed; start again.',
    });
  }
  // A token endpoint answering 5xx, or 2xx/3xx with something that is not a token response (an
  // HTML error page of a proxy in front of it), is an outage, not the user's error; any 4xx
  // (an OAuth error such as invalid_grant, JSON or not) stays the sign-in's fault below.
  const { status } = providerAnswer(err);
  const outage = status !== undefined && (status >= 500 || status < 400);
  if (err instanceof TypeError || isFetchFailure(err) || isTimeout(err) || outage || keySetUnavailable(err)) {
    return new GatewayError('provider_unavailable', { cause: err });
  }
  // Validation failures (iss, aud, nonce, signature, iat...) are the provider's answer being
  // unacceptable: fail closed with a 400 and no session.
  return new GatewayError('invalid_request', { cause: err, description: 'The sign-in could not be completed; start again.' });
}

/**
 * The provider's key set could not be had: its fetch timed out (JWKSTimeout), the answer was not
 * a 200 or not JSON, or the JSON is no public key set (JWKSInvalid). jose (6.2) has no class of
 * its own for "not 200 / not JSON": it throws its base JOSEError, whose code ERR_JOSE_GENERIC
 * every subclass overrides and which nothing else in jose throws (jwks/remote.js fetchJwks), so
 * the code tells it apart without the message. Pinned by
 * test/integration/reliability/callback-provider-outage.test.ts. A signature or claim that does
 * not verify is a subclass with its own code, and stays the sign-in's 400.
 */
export function keySetUnavailable(err: unknown): boolean {
  if (!(err instanceof joseErrors.JOSEError)) return false;
  return err instanceof joseErrors.JWKSTimeout || err.code === joseErrors.JOSEError.code || err instanceof joseErrors.JWKSInvalid;
}

/**
 * fetch() did not reach the host (refused, reset, DNS, TLS): undici's TypeError with the socket
 * error as its cause. Told by name, not instanceof: the fetch that jose runs for the key set
 * may belong to another realm than this module's TypeError (a VM context, a test runner).
 */
export function isFetchFailure(err: unknown): boolean {
  if (typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'TypeError' && (err as { cause?: unknown }).cause !== undefined) return true;
  // An answer refused for its size (bounded-fetch.ts): at the fetch, or under the parse error of
  // the read it cut short.
  return inCauses(err, (e) => e.code === ANSWER_TOO_LARGE);
}

/**
 * The provider timeout cut the call: openid-client's OAUTH_TIMEOUT before the head came, or,
 * once a head came and the body stalled, the signal's TimeoutError (a DOMException) under the
 * parse error it caused (ClientError → OperationProcessingError → TimeoutError). The causes are
 * walked a few deep, never endlessly.
 */
function isTimeout(err: unknown): boolean {
  return inCauses(err, (e) => e.code === 'OAUTH_TIMEOUT' || e.name === 'TimeoutError');
}

type Cause = { code?: unknown; name?: unknown };

/** What `pick` finds first in `err` or its causes, a few deep (never endlessly). */
function firstInCauses<T>(err: unknown, pick: (e: Cause) => T | undefined): T | undefined {
  let at: unknown = err;
  for (let depth = 0; depth < 4 && typeof at === 'object' && at !== null; depth++) {
    const found = pick(at as Cause);
    if (found !== undefined) return found;
    at = (at as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Whether `err` or one of its causes, a few deep, is one that `test` names. */
const inCauses = (err: unknown, test: (e: Cause) => boolean): boolean => firstInCauses(err, (e) => (test(e) ? true : undefined)) === true;

/**
 * A short, secret-free label for logs: the OAuth error code or the error class, with the HTTP
 * status when the provider answered. A GatewayError is described by its cause, or by its
 * fixed description when it has none (e.g. refused provider metadata).
 */
export function describeProviderError(err: unknown): string {
  if (err instanceof GatewayError) return err.cause !== undefined ? describeProviderError(err.cause) : err.description;
  if (err instanceof ResponseBodyError) return `${oauthErrorCode(err.error) ?? NONSTANDARD} (HTTP ${err.status})`;
  if (err instanceof AuthorizationResponseError) return oauthErrorCode(err.error) ?? NONSTANDARD;
  const { status } = providerAnswer(err);
  if (err instanceof Error) {
    // fetch's own failure is a TypeError whose cause says why (CERT_HAS_EXPIRED,
    // ERR_TLS_CERT_ALTNAME_INVALID, ECONNREFUSED): without it a provider's bad certificate and a
    // refused connection read alike (found by the TLS red team).
    const label = (err as { code?: string }).code ?? withCauseCode(err);
    return status !== undefined ? `${label} (HTTP ${status})` : label;
  }
  return 'unknown error';
}

/** `TypeError: CERT_HAS_EXPIRED`: the class, and the first error code of its causes (a known shape only). */
function withCauseCode(err: Error): string {
  const code = firstInCauses(err.cause, (e) => (isErrorCodeName(e.code) ? e.code : undefined));
  return code === undefined ? err.name : `${err.name}: ${code}`;
}
