/**
 * Configuration that refuses the unsafe (issue 13): certainly-wrong settings stop startup with
 * one line each; settings that may be deliberate are warned about, one line each. No line ever
 * quotes a value.
 *
 * Mutation check: make `unsafeSettings` return `[]` (every refusal test fails), or
 * `riskySettings` return `[]` (every warning test fails).
 */
import { randomBytes } from 'node:crypto';
import { loadConfigFile, parseConfig } from '../../../src/config/load.js';
import { configProblems } from '../../support/config.js';

const DEMO_SESSION_SECRET = 'demo-session-secret-not-for-production-use';
const DEMO_KEY = 'ZGVtby1vbmx5LWtleS1ub3QtZm9yLXByb2R1Y3Rpb24=';
const DEMO_CLIENT_SECRET = 'demo-client-secret-not-for-production';

const key = () => randomBytes(32).toString('base64');
const secret = () => randomBytes(30).toString('base64');

function doc(overrides: { server?: object; oidc?: object; session?: object; redis?: object; routes?: object[]; dev?: object } = {}) {
  return {
    server: { publicUrl: 'https://app.example.com', ...overrides.server },
    oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientSecret: secret(), ...overrides.oidc },
    session: { secrets: [secret()], encryptionKeys: [key()], ...overrides.session },
    redis: overrides.redis ?? { url: 'rediss://redis.internal:6380' },
    routes: overrides.routes ?? [],
    ...(overrides.dev ? { dev: overrides.dev } : {}),
  };
}

const problems = (document: unknown): string[] => configProblems(document);

const warnings = (document: unknown) => parseConfig(document, { env: {} }).derived.warnings;

describe('refused: certainly wrong', () => {
  it('accepts a config with random secrets and TLS everywhere, without warnings', () => {
    expect(problems(doc())).toEqual([]);
    expect(warnings(doc())).toEqual([]);
  });

  it("refuses the demo's published session secret, encryption key and client secret outside the demo, one line each", () => {
    const found = problems(doc({ oidc: { clientSecret: DEMO_CLIENT_SECRET }, session: { secrets: [secret(), DEMO_SESSION_SECRET], encryptionKeys: [DEMO_KEY] } }));
    expect(found).toEqual([
      expect.stringMatching(/^session\.encryptionKeys\[0\]: is the demo key/),
      expect.stringMatching(/^session\.secrets\[1\]: is the demo secret/),
      expect.stringMatching(/^oidc\.clientSecret: is the demo client's secret/),
    ]);
    for (const line of found) for (const value of [DEMO_SESSION_SECRET, DEMO_KEY, DEMO_CLIENT_SECRET]) expect(line).not.toContain(value);
  });

  it('recognises the demo key however its base64 is spelled', () => {
    const respelled = Buffer.from(DEMO_KEY, 'base64').toString('base64url');
    expect(problems(doc({ session: { encryptionKeys: [respelled] } }))).toEqual([expect.stringMatching(/^session\.encryptionKeys\[0\]: is the demo key/)]);
  });

  it('refuses an all-zero or patterned key and a patterned secret', () => {
    const zero = Buffer.alloc(32).toString('base64');
    const pattern = Buffer.from('abcd'.repeat(8)).toString('base64');
    expect(problems(doc({ session: { secrets: ['a'.repeat(40)], encryptionKeys: [zero, pattern] } }))).toEqual([
      expect.stringMatching(/^session\.encryptionKeys\[0\]: is not random/),
      expect.stringMatching(/^session\.encryptionKeys\[1\]: is not random/),
      expect.stringMatching(/^session\.secrets\[0\]: is not random/),
    ]);
  });

  it('refuses a dev: section in an https deployment', () => {
    expect(problems(doc({ dev: {} }))).toEqual([expect.stringMatching(/^dev: .*never belongs in an https deployment/)]);
  });

  it('lets the demo (config/default.yaml, with dev:) use its published secrets', () => {
    const demo = loadConfigFile('config/default.yaml', { env: {} });
    expect(demo.dev).toBeDefined();
    expect(demo.session.secrets).toEqual([DEMO_SESSION_SECRET]);
  });
});

describe('warned: may be deliberate', () => {
  it('warns once about a cleartext Redis on another host, not about TLS or loopback', () => {
    expect(warnings(doc({ redis: { url: 'redis://10.0.0.5:6379' } }))).toEqual([expect.stringMatching(/^redis\.url: .*cleartext/)]);
    expect(warnings(doc({ redis: { url: 'redis://127.0.0.1:6379' } }))).toEqual([]);
  });

  it('warns about cleartext cluster and Sentinel nodes on other hosts', () => {
    expect(warnings(doc({ redis: { cluster: { nodes: ['redis://10.0.0.1:6379', '10.0.0.2:6379', 'redis://127.0.0.1:7000'] } } }))).toEqual([
      expect.stringMatching(/^redis\.cluster\.nodes: 2 node\(s\)/),
    ]);
    expect(warnings(doc({ redis: { sentinel: { name: 'm', nodes: ['10.0.0.1:26379'] } } }))).toEqual([expect.stringMatching(/^redis\.sentinel\.nodes: 1 node/)]);
  });

  it('warns about routes that send credentials over cleartext http to another host, not about auth: none or loopback', () => {
    const found = warnings(
      doc({
        routes: [
          { path: '/api', target: 'http://api.internal:8080', auth: 'user' },
          { path: '/legacy', target: 'http://legacy.internal', auth: 'apiKey', apiKey: { header: 'X-Key', value: 'k' } },
          { path: '/open', target: 'http://open.internal', auth: 'none' },
          { path: '/local', target: 'http://127.0.0.1:9000', auth: 'user' },
          { path: '/tls', target: 'https://api.internal', auth: 'client' },
        ],
      }),
    );
    expect(found).toEqual([expect.stringMatching(/^routes\[0\]\.target: sends access tokens/), expect.stringMatching(/^routes\[1\]\.target: sends an API key/)]);
  });

  it('finds nothing to warn about in the shipped production example', () => {
    const cfg = loadConfigFile('config/example.production.yaml', {
      env: { OIDC_CLIENT_SECRET: secret(), SESSION_SECRET: secret(), TOKEN_ENCRYPTION_KEY: key(), REDIS_URL: 'rediss://redis.internal:6380' },
    });
    expect(cfg.derived.warnings).toEqual([]);
  });
});
