/**
 * Structured logging with pino. Anything that could carry a credential is redacted by path,
 * and errors are reduced to name/code/message by the serializer (provider error objects carry
 * HTTP responses and claim sets that must not be dumped whole). The destination is injectable
 * so tests can scan every line for leaked secrets.
 */
import { types } from 'node:util';
import { pino, type Logger, type DestinationStream } from 'pino';
import { isErrorCodeName } from '../errors.js';

export type { Logger } from 'pino';

const REDACT = [
  'req.headers.cookie',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  'headers.cookie',
  'headers.authorization',
  '*.accessToken',
  '*.refreshToken',
  '*.idToken',
  '*.access_token',
  '*.refresh_token',
  '*.id_token',
  '*.code',
  '*.code_verifier',
  '*.client_secret',
  '*.clientSecret',
  '*.password',
  '*.logout_token',
];

const REDACTED = '[redacted]';

export interface LoggerOptions {
  level?: string;
  destination?: DestinationStream;
  base?: Record<string, unknown>;
  /** Fields added to every line, e.g. the active span's trace_id and span_id (tracing.ts). */
  mixin?: () => object;
}

interface SerializedError {
  type: string;
  /** A Node or library error code (CERT_HAS_EXPIRED, ECONNREFUSED): never a secret, so shown. */
  errorCode?: string;
  /** Any other code (a provider's OAuth `error`, which may quote what it was sent): only said to be there. */
  code?: '[redacted]';
  message: string;
  cause?: SerializedError;
}

/**
 * A parse error's message quotes what it parsed: V8 puts a short input whole, a long one ten
 * characters either side of the fault. A provider body typed JSON that is not (a token
 * response with an unquoted token, say) reached the log through oauth4webapi's cause chain.
 */
const QUOTES_ITS_INPUT = 'SyntaxError';


/**
 * An Error of any realm: Node's own (a socket's ECONNRESET) are not `instanceof` the Error of a
 * vm context the gateway runs in (an embedder's, Jest's), and were logged as "non-error thrown".
 */
function isError(value: unknown): value is Error {
  return value instanceof Error || types.isNativeError(value);
}

export function serializeError(err: unknown, depth = 0): SerializedError {
  if (!isError(err)) return { type: typeof err, message: 'non-error thrown' };
  const code = (err as { code?: unknown }).code;
  const oauthError = (err as { error?: unknown }).error;
  const out: SerializedError = {
    type: err.name,
    message: err.name === QUOTES_ITS_INPUT ? 'not shown: it may quote the input it failed on' : err.message.slice(0, 300),
    // A known code's shape: `*.code` redaction hid them all (found by the TLS red team).
    ...(isErrorCodeName(code)
      ? { errorCode: code }
      : // Redacted here, at every depth of the cause chain: the `*.code` path reaches the top only.
        typeof code === 'string' || typeof oauthError === 'string'
        ? { code: REDACTED }
        : {}),
  };
  if (isError(err.cause) && depth < 3) out.cause = serializeError(err.cause, depth + 1);
  return out;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: options.base ?? { service: 'bff-gateway' },
      redact: { paths: REDACT, censor: REDACTED },
      serializers: { err: serializeError, error: serializeError },
      timestamp: pino.stdTimeFunctions.isoTime,
      ...(options.mixin ? { mixin: options.mixin } : {}),
    },
    options.destination ?? pino.destination({ sync: false }),
  );
}
