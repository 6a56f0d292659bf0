import { GatewayError } from '../errors.js';

/** Marks an upstream request we aborted because its head did not arrive in time. */
export class UpstreamTimeout extends Error {
  override readonly name = 'UpstreamTimeout';
}

/** What an upstream that gave no answer is counted as (bff_upstream_errors_total's kinds). */
export const UPSTREAM_ERROR_KINDS: ReadonlySet<string> = new Set(['bad_gateway', 'gateway_timeout']);

/** Upstream transport failures → 502 bad_gateway; our own deadline → 504 gateway_timeout. */
export function fromUpstreamError(err: unknown): GatewayError {
  if (err instanceof UpstreamTimeout) return new GatewayError('gateway_timeout', { cause: err });
  return new GatewayError('bad_gateway', { cause: err });
}
