import type { Request } from 'express';
import { GatewayError } from '../errors.js';

/**
 * One optional string query parameter. Repeated parameters or nested objects (`a[b]=`) are
 * refused, so no handler ever sees an array where it expects a string.
 */
export function queryParam(req: Request, name: string, maxLength = 4096): string | undefined {
  const value: unknown = (req.query as Record<string, unknown>)[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length > maxLength) {
    throw new GatewayError('invalid_request', { description: `The ${name} parameter is malformed.` });
  }
  return value;
}
