/** Header names in the config: any HTTP token, and the CSRF header's own rules. */
import { z } from 'zod';

export const headerName = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, {
  message: 'must be an HTTP header name',
});

/**
 * The CSRF header must be one a page can only send after a CORS preflight, and one it can send at
 * all: not CORS-safelisted (Fetch §2.2.2: a cross-site form or fetch sends `Accept-Language: 1`
 * with no preflight, and the check would pass), not forbidden (Fetch §2.2.2: a browser never
 * lets a page set `Cookie`, `Origin` or `Sec-*`, so every call would be refused).
 */
// Fetch's safelist, Chromium's additions to it (client hints, `intervention`), and what a
// browser adds to a navigation itself with the value 1 (`Upgrade-Insecure-Requests`).
const SAFELISTED = new Set([
  'accept',
  'accept-language',
  'content-language',
  'content-type',
  'range',
  'device-memory',
  'downlink',
  'dpr',
  'ect',
  'intervention',
  'rtt',
  'save-data',
  'viewport-width',
  'width',
  'upgrade-insecure-requests',
]);
const FORBIDDEN = new Set(
  'accept-charset accept-encoding access-control-request-headers access-control-request-method connection content-length cookie cookie2 date dnt expect host keep-alive origin referer set-cookie te trailer transfer-encoding upgrade via'.split(' '),
);
export const csrfHeaderName = headerName.superRefine((name, ctx) => {
  const lower = name.toLowerCase();
  if (SAFELISTED.has(lower)) ctx.addIssue({ code: 'custom', message: 'is a header any site can send (CORS-safelisted, or set by the browser itself): use a custom name such as x-csrf' });
  else if (FORBIDDEN.has(lower) || lower.startsWith('proxy-') || lower.startsWith('sec-')) ctx.addIssue({ code: 'custom', message: 'is a header browsers do not let a page set: use a custom name such as x-csrf' });
});
