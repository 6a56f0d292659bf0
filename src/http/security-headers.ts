import helmet from 'helmet';
import type { RequestHandler } from 'express';

/**
 * helmet's defaults on everything the gateway answers itself (SPEC §8). Its default CSP is
 * already strict (self-only scripts, no inline script, no framing), which suits the demo SPA;
 * `form-action` includes the provider, or the browser blocks the sign-in redirect chain in
 * some engines.
 */
export function securityHeaders(options: { providerOrigin: string }): RequestHandler {
  return helmet({
    contentSecurityPolicy: {
      directives: {
        'form-action': ["'self'", options.providerOrigin],
        'connect-src': ["'self'"],
      },
    },
    referrerPolicy: { policy: 'no-referrer' },
    strictTransportSecurity: { maxAge: 31536000, includeSubDomains: true },
  });
}
