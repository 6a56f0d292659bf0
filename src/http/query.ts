import type { Request } from 'express';
import { GatewayError } from '../errors.js';

/**
 * A request's query, read once by the WHATWG parser, the one openid-client (and every URL the
 * gateway builds) reads with. Express's own query parser is off (app.ts): Node's querystring
 * stopped at 1,000 parameters where URLSearchParams does not, so the callback's `state` could
 * be one thing to the gateway and another to openid-client. The callback hands openid-client
 * this same reading, re-serialised.
 */
export function queryOf(req: Request): URLSearchParams {
  const url = req.originalUrl;
  const at = url.indexOf('?');
  return new URLSearchParams(at === -1 ? '' : url.slice(at + 1));
}

/** One optional parameter: given twice or past `maxLength`, it is refused, never picked from. */
export function oneParam(query: URLSearchParams, name: string, maxLength = 4096): string | undefined {
  const values = query.getAll(name);
  if (values.length === 0) return undefined;
  if (values.length > 1 || values[0]!.length > maxLength) {
    throw new GatewayError('invalid_request', { description: `The ${name} parameter is malformed.` });
  }
  return values[0];
}
