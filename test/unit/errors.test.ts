import { readFileSync } from 'node:fs';
import { ERROR_CODES, GatewayError } from '../../src/errors.js';

describe('error registry', () => {
  it('gives every code a 4xx/5xx status and a one-sentence description', () => {
    for (const [code, { status, description }] of Object.entries(ERROR_CODES)) {
      expect(status).toBeGreaterThanOrEqual(400);
      expect(status).toBeLessThan(600);
      expect(description).toMatch(/^[A-Z].*\.$/);
      expect(new GatewayError(code as keyof typeof ERROR_CODES).toBody()).toEqual({ error: code, error_description: description });
    }
  });

  it('keeps the SPEC codes and statuses', () => {
    const spec = {
      login_required: 401, csrf_check_failed: 403, insufficient_scope: 403, invalid_return_to: 400, invalid_state: 400,
      invalid_request: 400, not_found: 404, token_refresh_failed: 502, bad_gateway: 502, gateway_timeout: 504,
      session_store_unavailable: 503, rate_limited: 429,
    };
    for (const [code, status] of Object.entries(spec)) expect(ERROR_CODES[code as keyof typeof ERROR_CODES].status).toBe(status);
  });

  it('is documented in the README table, row for row', () => {
    const readme = readFileSync('README.md', 'utf8');
    const section = readme.slice(readme.indexOf('<!-- error-codes:start -->'), readme.indexOf('<!-- error-codes:end -->'));
    const rows = [...section.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)].map((m) => [m[1], Number(m[2])]);
    expect(rows).toEqual(Object.entries(ERROR_CODES).map(([code, { status }]) => [code, status]));
  });
});
