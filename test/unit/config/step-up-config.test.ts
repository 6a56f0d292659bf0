/**
 * The config keys of step-up and PAR (SPEC §2): a route's `stepUp` and
 * `oidc.pushedAuthorizationRequests`, with their defaults and cross-field rules, reported one
 * line per problem without printing a value.
 *
 * Mutation that fails this file: in src/config/consistency.ts routeProblems, delete the line
 * `if (route.stepUp && route.auth !== 'user') issue(['routes', i, 'stepUp'], 'needs auth: user (a signed-in session to judge)');`.
 */
import { randomBytes } from 'node:crypto';
import { parseConfig } from '../../../src/config/load.js';
import { configProblems } from '../../support/config.js';

const minimal = (overrides: Record<string, unknown> = {}) => ({
  server: { publicUrl: 'https://app.example.com' },
  oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientSecret: 'top-secret-value' },
  session: { secrets: [randomBytes(30).toString('base64')], encryptionKeys: [randomBytes(32).toString('base64')] },
  redis: { url: 'redis://127.0.0.1:6379' },
  ...overrides,
});

const problems = (doc: unknown): string[] => configProblems(doc);

describe('step-up and PAR configuration', () => {
  it('defaults pushedAuthorizationRequests to auto and accepts a route stepUp', () => {
    const cfg = parseConfig(
      minimal({ routes: [{ path: '/api/pay', target: 'http://up:1', stepUp: { acr: ['urn:example:mfa'], maxAgeSeconds: 300 } }] }),
      { env: {} },
    );
    expect(cfg.oidc.pushedAuthorizationRequests).toBe('auto');
    expect(cfg.routes[0]?.stepUp).toEqual({ acr: ['urn:example:mfa'], maxAgeSeconds: 300 });
  });

  it('reports each malformed step-up or PAR setting on its own line, without the value', () => {
    const lines = problems(
      minimal({
        oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientSecret: 'top-secret-value', pushedAuthorizationRequests: 'sometimes' },
        routes: [
          { path: '/c', target: 'http://up:1', stepUp: { acr: ['has space'] } },
          { path: '/d', target: 'http://up:1', stepUp: { maxAgeSeconds: -1 } },
          { path: '/e', target: 'http://up:1', stepUp: { acr: [] } },
          { path: '/f', target: 'http://up:1', stepUp: { acr: ['x'], extra: true } },
        ],
      }),
    );
    const prefixes = ['oidc.pushedAuthorizationRequests:', 'routes[0].stepUp.acr[0]:', 'routes[1].stepUp.maxAgeSeconds:', 'routes[2].stepUp.acr:', 'routes[3].stepUp:'];
    expect(prefixes.map((prefix) => lines.filter((l) => l.startsWith(prefix)).length)).toEqual([1, 1, 1, 1, 1]);
    expect(lines).toHaveLength(5);
    expect(lines.join('\n')).not.toContain('has space');
    expect(lines.join('\n')).not.toContain('sometimes');
  });

  it('requires a stepUp to say something, and to sit on an auth: user route', () => {
    const lines = problems(
      minimal({
        routes: [
          { path: '/a', target: 'http://up:1', auth: 'client', stepUp: { acr: ['x'] } },
          { path: '/b', target: 'http://up:1', auth: 'user-optional', stepUp: { maxAgeSeconds: 60 } },
          { path: '/c', target: 'http://up:1', stepUp: {} },
        ],
      }),
    );
    expect(lines).toEqual([
      'routes[0].stepUp: needs auth: user (a signed-in session to judge)',
      'routes[1].stepUp: needs auth: user (a signed-in session to judge)',
      'routes[2].stepUp: must set acr, maxAgeSeconds or both',
    ]);
  });
});
