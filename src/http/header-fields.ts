/**
 * How many header fields a request may carry: Apache httpd's LimitRequestFields default. A
 * browser sends about twenty, and whatever sits in front adds a few. Node's own limit
 * (maxHeadersCount) is off (server-options.ts): Node before 22.23.2 and 24.18.1 left the fields
 * past it out of req.headers while still framing the body by them, and an upstream on such a Node
 * would do the same to what the gateway forwards, which this bound keeps far below its 1,000.
 */
import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../errors.js';

export const MAX_HEADER_FIELDS = 100;

export function tooManyHeaderFields(req: IncomingMessage): GatewayError | undefined {
  return req.rawHeaders.length > 2 * MAX_HEADER_FIELDS ? new GatewayError('too_many_header_fields') : undefined;
}
