/**
 * The gateway's error codes (SPEC §6) and its one error type.
 *
 * Descriptions are fixed sentences: they never contain request input, tokens or provider
 * error text, so an error body can always be shown to the browser as is. The detail for
 * operators travels in `cause` and reaches the (redacting) logger only.
 */
export const ERROR_CODES = {
  invalid_request: { status: 400, description: 'The request is malformed.' },
  invalid_return_to: { status: 400, description: 'The returnTo parameter must be a same-origin relative path.' },
  invalid_state: {
    status: 400,
    description: 'This login response does not match a login started in this browser.',
  },
  login_required: { status: 401, description: 'Sign in to continue.' },
  step_up_required: {
    status: 401,
    description: 'This API needs a stronger or more recent sign-in; sign in again to continue.',
  },
  csrf_check_failed: { status: 403, description: 'The x-csrf header is missing or wrong.' },
  insufficient_scope: {
    status: 403,
    description: 'The session was not granted a scope this API requires.',
  },
  not_found: { status: 404, description: 'There is nothing here.' },
  method_not_allowed: { status: 405, description: 'This method is not allowed here.' },
  request_timeout: { status: 408, description: 'The request body did not arrive in time.' },
  rate_limited: { status: 429, description: 'Too many requests; try again later.' },
  too_many_header_fields: { status: 431, description: 'The request has more header fields than the gateway reads.' },
  server_error: { status: 500, description: 'The gateway failed unexpectedly.' },
  token_refresh_failed: {
    status: 502,
    description: 'The identity provider could not renew the session tokens; try again shortly.',
  },
  bad_gateway: { status: 502, description: 'The upstream API could not be reached.' },
  provider_unavailable: {
    status: 503,
    description: 'The identity provider is not reachable yet; try again shortly.',
  },
  session_store_unavailable: {
    status: 503,
    description: 'The session store is unavailable; try again shortly.',
  },
  gateway_timeout: { status: 504, description: 'The upstream API did not answer in time.' },
} as const satisfies Record<string, { status: number; description: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ErrorBody {
  error: ErrorCode;
  error_description: string;
  /** The code's details (ErrorDetails): canonical values the gateway built. */
  [field: string]: string | number | null;
}

/**
 * Machine-readable fields some codes add to the body (step_up_required: acr_values, max_age,
 * loginUrl). Built by the gateway from canonical values, never copied from a request.
 */
export type ErrorDetails = Readonly<Record<string, string | number | null>>;

export class GatewayError extends Error {
  override readonly name = 'GatewayError';
  readonly code: ErrorCode;
  readonly status: number;
  /** A fixed sentence safe to show the browser; defaults to the registry's. */
  readonly description: string;
  /** Extra response headers, e.g. Retry-After for rate_limited. */
  readonly headers: Readonly<Record<string, string>>;
  readonly details: ErrorDetails | undefined;

  constructor(
    code: ErrorCode,
    options: { cause?: unknown; description?: string; headers?: Record<string, string>; details?: ErrorDetails } = {},
  ) {
    const entry = ERROR_CODES[code];
    super(options.description ?? entry.description, { cause: options.cause });
    this.code = code;
    this.status = entry.status;
    this.description = options.description ?? entry.description;
    this.headers = options.headers ?? {};
    this.details = options.details;
  }

  /** The same error, saying more headers (Retry-After where the caller knows when to come back). */
  withHeaders(headers: Record<string, string>): GatewayError {
    return new GatewayError(this.code, {
      description: this.description,
      headers: { ...this.headers, ...headers },
      ...(this.details ? { details: this.details } : {}),
      cause: this.cause,
    });
  }

  toBody(): ErrorBody {
    const base = { error: this.code, error_description: this.description };
    // error and error_description first, and never replaced by a detail.
    return this.details ? { ...base, ...this.details, ...base } : base;
  }
}

/**
 * Whether `code` has the shape of Node's, undici's and the libraries' error codes
 * (CERT_HAS_EXPIRED, ECONNREFUSED, ERR_JWT_EXPIRED): constants, never a peer's words, so logs
 * may show them (observability/logger.ts, oidc/errors.ts describeProviderError).
 */
export function isErrorCodeName(code: unknown): code is string {
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]{1,63}$/.test(code);
}
