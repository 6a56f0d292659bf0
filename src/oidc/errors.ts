/**
 * The only file that knows openid-client's and jose's error classes. Failures are classified by
 * typed fields (`ResponseBodyError.error`, status), never by message text, and the provider's
 * own words never reach the browser: they stay in `cause`, for the log.
 */
import { AuthorizationResponseError, ResponseBodyError } from 'openid-client';
import { GatewayError } from '../errors.js';

/** A refresh or client-credentials call failed. */
export function fromGrantError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  if (err instanceof ResponseBodyError && err.error === 'invalid_grant') {
    return new GatewayError('login_required', { cause: err });
  }
  return new GatewayError('token_refresh_failed', { cause: err });
}

/** The code exchange or ID token validation at the callback failed. */
export function fromCallbackError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  if (err instanceof AuthorizationResponseError || err instanceof ResponseBodyError) {
    return new GatewayError('invalid_request', {
      cause: err,
      description: 'The sign-in could not be completed; start again.',
    });
  }
  if (err instanceof TypeError || isTimeout(err)) {
    return new GatewayError('provider_unavailable', { cause: err });
  }
  // Validation failures (iss, aud, nonce, signature, iat...) are the provider's answer being
  // unacceptable: fail closed with a 400 and no session.
  return new GatewayError('invalid_request', { cause: err, description: 'The sign-in could not be completed; start again.' });
}

function isTimeout(err: unknown): boolean {
  return err instanceof Error && (err as { code?: string }).code === 'OAUTH_TIMEOUT';
}

/** A short, secret-free label for logs: the OAuth error code or the error class. */
export function describeProviderError(err: unknown): string {
  if (err instanceof ResponseBodyError) return `${err.error} (HTTP ${err.status})`;
  if (err instanceof AuthorizationResponseError) return err.error;
  if (err instanceof Error) return (err as { code?: string }).code ?? err.name;
  return 'unknown error';
}
