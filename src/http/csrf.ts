import type { RequestHandler } from 'express';
import { GatewayError } from '../errors.js';

/**
 * A static custom header (SPEC §4, draft-ietf-oauth-browser-based-apps §6.1.3.3.2): a cross-site
 * page cannot add it without a CORS preflight, which the gateway never grants.
 */
export function requireCsrf(headerName: string): RequestHandler {
  const name = headerName.toLowerCase();
  return function requireCsrfHeader(req, _res, next) {
    next(req.headers[name] === '1' ? undefined : new GatewayError('csrf_check_failed'));
  };
}
