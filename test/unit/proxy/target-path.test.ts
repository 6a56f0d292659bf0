/**
 * The one join of a route target's path and the forwarded request target (httpxy's rule), used
 * by WebSocket handshakes and DPoP proofs' htu so that both name the URL HTTP calls go to.
 *
 * Mutation that fails it (checked by hand): in src/proxy/target-path.ts, drop the line
 * `if (!forwarded || forwarded === '/') return base;` (a bare prefix then gets a slash added).
 */
import { joinTargetPath } from '../../../src/proxy/target-path.js';
import { proofTarget } from '../../../src/proxy/dpop-proofs.js';

it.each([
  ['/', '/x', '/x'],
  ['', '/x?q=1', '/x?q=1'],
  ['/base', '/', '/base'],
  ['/base', '/?q=1', '/base/?q=1'],
  ['/base', '/x', '/base/x'],
  ['/base/', '/x', '/base/x'],
  ['/base/', '/', '/base/'],
])('joins %j and %j into %j', (base, forwarded, joined) => {
  expect(joinTargetPath(base, forwarded)).toBe(joined);
});

it('gives htu without the query, and never a fragment', () => {
  const target = new URL('https://API.example:443/base?tenant=1');
  expect(proofTarget(target, '/x?q=1')).toBe('https://api.example/base/x');
  expect(proofTarget(target, '/')).toBe('https://api.example/base');
  expect(proofTarget(target, '/?q=#x')).toBe('https://api.example/base/');
});
