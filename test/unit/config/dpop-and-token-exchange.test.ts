/**
 * The config rules of DPoP and token exchange (SPEC §2, §4): where they may be used, what they
 * cannot be combined with, and which routes end up sending DPoP.
 *
 * Mutation that fails it (checked by hand): in src/config/derive.ts, derive `dpop` from
 * `cfg.oidc.dpop` alone: a per-route `dpop: true` no longer gives sessions a key.
 */
import { randomBytes } from 'node:crypto';
import { parseConfig } from '../../../src/config/load.js';
import { configProblems } from '../../support/config.js';
import { routeMatcher } from '../../support/routes.js';
import { providerAcceptsDpop } from '../../../src/oidc/dpop.js';

function doc(routes: unknown[], oidc: Record<string, unknown> = {}) {
  return {
    server: { publicUrl: 'https://app.example.com' },
    oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientSecret: 'top-secret-value', ...oidc },
    session: { secrets: [randomBytes(30).toString('base64')], encryptionKeys: [randomBytes(32).toString('base64')] },
    redis: { url: 'redis://127.0.0.1:6379' },
    routes,
  };
}

const problems = (value: unknown): string[] => configProblems(value);

const route = (extra: Record<string, unknown>) => ({ path: '/api', target: 'https://api.internal', auth: 'user', ...extra });

describe('DPoP and token exchange config', () => {
  it('is off by default, and a per-route dpop gives every session a key', () => {
    expect(parseConfig(doc([route({})]), { env: {} }).derived.dpop).toBe(false);
    const cfg = parseConfig(doc([route({ dpop: true }), { ...route({}), path: '/other' }]), { env: {} });
    expect(cfg.derived.dpop).toBe(true);
    const match = routeMatcher(cfg.routes, cfg.oidc.dpop);
    expect(match('/api/x')?.dpop).toBe(true);
    expect(match('/other/x')?.dpop).toBe(false);
  });

  it('with oidc.dpop, sends DPoP on every user route except token-exchange ones', () => {
    const cfg = parseConfig(
      doc(
        [
          route({}),
          { ...route({}), path: '/opt', auth: 'user-optional' },
          { path: '/cc', target: 'https://cc.internal', auth: 'client' },
          { ...route({ tokenExchange: { audience: 'https://ledger' } }), path: '/ledger' },
        ],
        { dpop: true },
      ),
      { env: {} },
    );
    expect(cfg.derived.dpop).toBe(true);
    const match = routeMatcher(cfg.routes, cfg.oidc.dpop);
    expect(['/api', '/opt', '/cc', '/ledger'].map((p) => match(p)?.dpop)).toEqual([true, true, false, false]);
  });

  it('refuses dpop and tokenExchange on routes without a user, and the combinations that cannot work', () => {
    const found = problems(
      doc([
        { path: '/cc', target: 'https://cc.internal', auth: 'client', dpop: true },
        { path: '/none', target: 'https://n.internal', auth: 'none', tokenExchange: { audience: 'a' } },
        { ...route({ dpop: true, tokenExchange: { audience: 'a' } }), path: '/both' },
        { ...route({ resource: 'https://r.example', tokenExchange: { audience: 'a' } }), path: '/res' },
      ]),
    ).join('\n');
    expect(found).toContain('routes[0].dpop');
    expect(found).toContain('routes[1].tokenExchange');
    expect(found).toContain('routes[2].dpop');
    expect(found).toContain('routes[3].tokenExchange');
    // Shape errors, one line each (a misspelt key is an error, not ignored).
    const shape = problems(doc([route({ tokenExchange: { audience: '', audeince: 'x' } })])).join('\n');
    expect(shape).toContain('routes[0].tokenExchange.audience');
    expect(shape).toContain('audeince');
  });

  it('needs a provider that lists ES256 for DPoP proofs', () => {
    expect(providerAcceptsDpop({ issuer: 'x', dpop_signing_alg_values_supported: ['ES256', 'EdDSA'] })).toBe(true);
    expect(providerAcceptsDpop({ issuer: 'x', dpop_signing_alg_values_supported: ['EdDSA'] })).toBe(false);
    expect(providerAcceptsDpop({ issuer: 'x' })).toBe(false);
  });
});
