/**
 * The request target at the trust boundary (pure): one canonical path for every request, HTTP
 * and WebSocket upgrade alike, computed once before anything routes on it. The rules are in
 * config/canonical-path.ts, shared with the config's route paths (see there for why).
 *
 * Only origin-form targets are served (RFC 9112 §3.2.1): absolute-form (`GET http://x/...`,
 * meant for forward proxies), asterisk-form (`OPTIONS *`) and anything else not starting with
 * "/" are refused. The query is passed on untouched: it is the upstream's to interpret.
 */
import { GatewayError } from '../errors.js';
import { canonicalPath, type PathRefusal } from '../config/canonical-path.js';

export { canonicalPath, decodePath, looseReading, under, type PathRefusal, type PathRefusalReason } from '../config/canonical-path.js';

const NOT_ORIGIN_FORM: PathRefusal = Object.freeze({ refused: 'not_origin_form' });

/**
 * The canonical request target (canonical path + the query as sent), or why it is refused.
 * Returns `url` itself when it is already canonical: the common case allocates nothing.
 */
export function canonicalTarget(url: string | undefined): string | PathRefusal {
  if (url === undefined || url.charCodeAt(0) !== 0x2f /* / */) return NOT_ORIGIN_FORM;
  const q = url.indexOf('?');
  if (q === -1) return canonicalPath(url);
  const path = url.slice(0, q);
  const canonical = canonicalPath(path);
  if (typeof canonical !== 'string') return canonical;
  return canonical === path ? url : canonical + url.slice(q);
}

/** The one answer to a refused path: 400 invalid_request (SPEC §4), the reason for the logs. */
export function refusedPath(refusal: PathRefusal): GatewayError {
  const description = refusal.refused === 'not_origin_form' ? 'The request target must be a path.' : 'The request path is ambiguous.';
  return new GatewayError('invalid_request', { description, cause: refusal.refused });
}
