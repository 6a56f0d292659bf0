import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfigFile, parseConfig } from '../../../src/config/load.js';
import { configProblems } from '../../support/config.js';
import { interpolate } from '../../../src/config/interpolate.js';

const KEY = randomBytes(32).toString('base64');
const SECRET = randomBytes(30).toString('base64');

function minimal(overrides: Record<string, unknown> = {}) {
  return {
    server: { publicUrl: 'https://app.example.com' },
    oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientSecret: 'top-secret-value' },
    session: { secrets: [SECRET], encryptionKeys: [KEY] },
    redis: { url: 'redis://127.0.0.1:6379' },
    ...overrides,
  };
}

const problems = (doc: unknown, env: Record<string, string> = {}): string[] => configProblems(doc, env);

describe('config loading', () => {
  it('accepts a minimal production config and fills the SPEC defaults', () => {
    const cfg = parseConfig(minimal(), { env: {} });
    expect(cfg.server.authPath).toBe('/auth');
    expect(cfg.session.idleTimeoutSeconds).toBe(1800);
    expect(cfg.session.absoluteTimeoutSeconds).toBe(43200);
    expect(cfg.csrf.headerName).toBe('x-csrf');
    expect(cfg.tokens.refreshSkewSeconds).toBe(30);
    expect(cfg.derived.redirectUri).toBe('https://app.example.com/auth/callback');
  });

  // Fails if csrf.headerName is the plain headerName schema again (csrfHeaderName's checks gone):
  // `Accept-Language: 1` goes cross-site with no preflight, and the CSRF check passed.
  it('refuses a CSRF header name any site can send without a preflight, or a page cannot send at all', () => {
    for (const name of ['accept-language', 'Accept', 'content-type', 'content-language', 'range', 'DPR', 'device-memory', 'viewport-width', 'upgrade-insecure-requests']) {
      expect(problems(minimal({ csrf: { headerName: name } }))).toEqual([
        `csrf.headerName: is a header any site can send (CORS-safelisted, or set by the browser itself): use a custom name such as x-csrf`,
      ]);
    }
    for (const name of ['cookie', 'Origin', 'sec-fetch-site', 'proxy-x']) {
      expect(problems(minimal({ csrf: { headerName: name } }))).toEqual([`csrf.headerName: is a header browsers do not let a page set: use a custom name such as x-csrf`]);
    }
    expect(problems(minimal({ csrf: { headerName: 'X-Requested-With' } }))).toEqual([]);
  });

  it('names the session and login cookies __Host- and marks cookies secure when publicUrl is https', () => {
    const cfg = parseConfig(minimal(), { env: {} });
    expect(cfg.derived.sessionCookieName).toBe('__Host-bff');
    expect(cfg.derived.loginCookieName).toBe('__Host-bff-login');
    expect(cfg.derived.secureCookies).toBe(true);
  });

  it('keeps plain cookie names for a loopback http publicUrl', () => {
    const cfg = parseConfig(minimal({ server: { publicUrl: 'http://localhost:3000' } }), { env: {} });
    expect(cfg.derived.sessionCookieName).toBe('bff');
    expect(cfg.derived.secureCookies).toBe(false);
  });

  it('freezes the result so nothing can change it at run time', () => {
    const cfg = parseConfig(minimal(), { env: {} });
    expect(Object.isFrozen(cfg)).toBe(true);
    expect(Object.isFrozen(cfg.session.encryptionKeys)).toBe(true);
  });

  it('refuses an http:// issuer unless its host is loopback', () => {
    expect(problems(minimal({ oidc: { issuer: 'http://idp.example.com', clientId: 'x', clientSecret: 'y' } }))).toEqual([
      'oidc.issuer: http:// is allowed only for loopback hosts; use https://',
    ]);
    expect(problems(minimal({ oidc: { issuer: 'http://127.0.0.1:4000', clientId: 'x', clientSecret: 'y' } }))).toEqual([]);
    expect(problems(minimal({ oidc: { issuer: 'http://localhost:4000', clientId: 'x', clientSecret: 'y' } }))).toEqual([]);
  });

  it('reports every problem, one line each, with its key path', () => {
    const lines = problems({
      server: { publicUrl: 'not a url', port: 'eighty' },
      oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientSecret: 'x', clockToleranceSeconds: -1 },
      session: { secrets: ['short'], encryptionKeys: ['AAAA'], sameSite: 'none', idleTimeoutSeconds: 100, absoluteTimeoutSeconds: 10 },
      redis: { url: 'redis://127.0.0.1:6379' },
      routes: [{ path: 'api', target: 'http://x' }],
      extra: true,
    });
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^server\.publicUrl: must be an absolute http\(s\) URL/),
        expect.stringMatching(/^server\.port: /),
        expect.stringMatching(/^oidc\.clockToleranceSeconds: /),
        'session.secrets[0]: must be at least 32 characters',
        'session.encryptionKeys[0]: must be 32 bytes, base64-encoded (e.g. `openssl rand -base64 32`)',
        expect.stringMatching(/^session\.sameSite: /),
        expect.stringMatching(/^routes\[0\]\.path: must be a path starting with "\/"/),
        expect.stringMatching(/^\(root\): Unrecognized key/),
      ]),
    );
    expect(lines.length).toBeGreaterThanOrEqual(8);
  });

  // Fails if, in src/config/schema.ts httpsUnlessLoopback, `URL.canParse(value) &&` is removed
  // (the guard of the old superRefine's `if (!URL.canParse(value)) continue;`): `new URL` throws
  // out of the parse and no problem line is printed at all.
  it('reports a publicUrl or issuer that is not a URL with every other problem, not as a crash', () => {
    const lines = problems(
      minimal({
        server: { publicUrl: 'app.example.com' },
        oidc: { issuer: 'idp.example.com', clientId: 'bff', clientSecret: 'top-secret-value', scopes: ['profile'] },
      }),
    );
    expect(lines).toEqual([
      'server.publicUrl: must be an absolute http(s) URL',
      'oidc.issuer: must be an absolute http(s) URL',
      'oidc.scopes: must include "openid"',
    ]);
    // dev: reads publicUrl's scheme too (safety.ts).
    expect(problems(minimal({ server: { publicUrl: 'app.example.com' }, dev: {} }))).toEqual(['server.publicUrl: must be an absolute http(s) URL']);
  });

  // Fails if, in src/config/schema.ts withoutParts, the line
  // `if (parts.userinfo && (url.username !== '' || url.password !== '')) add(parts.userinfo);` is removed.
  it('refuses the parts of publicUrl and a route target that would be dropped, quoting none of them', () => {
    const atPublicUrl = (publicUrl: string) => problems(minimal({ server: { publicUrl } }));
    expect(atPublicUrl('https://admin:PUBLIC-PASSWORD@app.example.com')).toEqual(['server.publicUrl: must not carry credentials (user:password@)']);
    expect(atPublicUrl('https://app.example.com/?x=1')).toEqual(['server.publicUrl: must be an origin without a query']);
    expect(atPublicUrl('https://app.example.com#top')).toEqual(['server.publicUrl: must be an origin without a fragment']);
    expect(atPublicUrl('https://app.example.com/')).toEqual([]);
    const atTarget = (target: string) => problems(minimal({ routes: [{ path: '/api', target }] }));
    const lines = atTarget('https://u:TARGET-PASSWORD@api.example.com');
    expect(lines).toEqual(['routes[0].target: must not carry credentials: they are not sent to the upstream (use auth: apiKey for a key)']);
    expect(atTarget('https://api.example.com/v1#frag')).toEqual(['routes[0].target: must not have a fragment: it is never sent']);
    // A target's query is kept (proxy-target.ts sends it).
    expect(atTarget('https://api.example.com/v1?tenant=a')).toEqual([]);
    expect([...lines, ...atPublicUrl('https://admin:PUBLIC-PASSWORD@app.example.com')].join('\n')).not.toMatch(/PASSWORD|admin/);
  });

  it('refuses cluster or sentinel nodes that mix rediss:// and plaintext (one TLS setting covers them all)', () => {
    // Fails if, in src/config/schema.ts, `cluster: z.strictObject({ nodes: redisNodes })` goes back to `z.array(redisNode).min(1)`.
    const mixed = ['rediss://a:6379', 'b:6379'];
    expect(problems(minimal({ redis: { cluster: { nodes: mixed } } }))).toEqual([
      'redis.cluster.nodes: mix rediss:// and plaintext nodes; use rediss:// for all of them (TLS everywhere) or for none',
    ]);
    expect(problems(minimal({ redis: { sentinel: { name: 'm', nodes: ['REDISS://a:26379', 'redis://b:26379'] } } }))).toHaveLength(1);
    expect(problems(minimal({ redis: { cluster: { nodes: ['rediss://a:6379', 'REDISS://b:6379'] } } }))).toEqual([]);
    expect(problems(minimal({ redis: { cluster: { nodes: ['redis://a:6379', 'b:6379'] } } }))).toEqual([]);
  });

  // Fails if, in src/config/schema.ts, `const redisNode = z.string().superRefine(...)` goes back
  // to `z.string().min(1)`: the bad nodes pass, and startup dies with `fatal: Invalid URL`.
  it('refuses a cluster or sentinel node that is not host:port or a redis(s):// URL with a host, one line each', () => {
    const shape = 'must be host:port (an IPv6 address in brackets, port 1-65535) or a redis:// or rediss:// URL with a host';
    expect(problems(minimal({ redis: { cluster: { nodes: ['10.0.0.1:6379', '10.0.0.2:63790x', 'a:70000', '::1', 'redis://', 'http://a:6379', '[::1', 'a:0'] } } }))).toEqual([
      `redis.cluster.nodes[1]: ${shape}`,
      `redis.cluster.nodes[2]: ${shape}`,
      `redis.cluster.nodes[3]: ${shape}`,
      `redis.cluster.nodes[4]: ${shape}`,
      `redis.cluster.nodes[5]: ${shape}`,
      `redis.cluster.nodes[6]: ${shape}`,
      `redis.cluster.nodes[7]: ${shape}`,
    ]);
    const withPassword = problems(minimal({ redis: { sentinel: { name: 'm', nodes: ['redis://:NODE-PASSWORD@s1:26379', 's2:26379'] } } }));
    expect(withPassword).toEqual([expect.stringMatching(/^redis\.sentinel\.nodes\[0\]: must not carry credentials/)]);
    expect(withPassword.join('\n')).not.toContain('NODE-PASSWORD');
    const good = ['redis-1:6379', 'redis_2', '10.0.0.3:7000', '[::1]:6379', '[fd00::2]', 'redis://r4:6379', 'REDIS://[fd00::5]:7001'];
    expect(problems(minimal({ redis: { cluster: { nodes: good } } }))).toEqual([]);
  });

  it('checks cross-field rules: timeouts, redis modes, route paths, apiKey', () => {
    const lines = problems(
      minimal({
        session: { secrets: [SECRET], encryptionKeys: [KEY], idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 60 },
        redis: { url: 'redis://a:6379', cluster: { nodes: ['redis://b:6379'] } },
        routes: [
          { path: '/api', target: 'http://up:1' },
          { path: '/api', target: 'http://up:2' },
          { path: '/auth/x', target: 'http://up:3' },
          { path: '/legacy', target: 'http://up:4', auth: 'apiKey' },
        ],
      }),
    );
    expect(lines).toEqual(
      expect.arrayContaining([
        'session.absoluteTimeoutSeconds: must be at least session.idleTimeoutSeconds',
        'redis: must set exactly one of url, cluster or sentinel',
        'routes[1].path: is used by another route',
        'routes[2].path: must not be "/" or lie under server.authPath (/auth)',
        'routes[3].apiKey: is required when auth is apiKey',
      ]),
    );
  });

  // Fails if, in src/config/consistency.ts routeProblems, `} else if (within(authMatched, matched)) {` becomes
  // `} else if (false) {`: authPath under /api passes, and its requests would be proxied.
  it('refuses server.authPath equal to or under a route (routes are matched first), or "/"', () => {
    const withAuth = (authPath: string, paths: string[]) =>
      problems(minimal({ server: { publicUrl: 'https://app.example.com', authPath }, routes: paths.map((p, i) => ({ path: p, target: `https://up:${i + 1}` })) }));
    expect(withAuth('/api/auth', ['/other', '/api'])).toEqual([
      'server.authPath: must not lie under routes[1].path (/api): its requests would go to that upstream',
    ]);
    expect(withAuth('/api/a%21b/auth', ['/api/a!b'])).toHaveLength(1);
    // Equal is reported on the route, as before; a segment boundary is required either way.
    expect(withAuth('/api', ['/api'])).toEqual(['routes[0].path: must not be "/" or lie under server.authPath (/api)']);
    expect(withAuth('/apiauth', ['/api'])).toEqual([]);
    expect(withAuth('/api', ['/apiv2'])).toEqual([]);
    expect(withAuth('/', [])).toEqual(['server.authPath: must not be "/": the gateway\'s endpoints need a prefix of their own']);
    expect(withAuth('/auth/', [])).toEqual(['server.authPath: must not end with "/"']);
    expect(withAuth('/a/../auth', [])).toEqual([expect.stringMatching(/^server\.authPath: must be canonical/)]);
  });

  // Fails if, in config/consistency.ts routeProblems, the `else if (seenLoose.has(looseReading(matched)))` check is removed.
  it('refuses two routes that differ only in letter case or trailing dots (a loose upstream reads both as one)', () => {
    const two = (a: string, b: string) => problems(minimal({ routes: [{ path: a, target: 'https://up:1' }, { path: b, target: 'https://up:2' }] }));
    const refused = ['routes[1].path: differs from another route only in letter case or trailing dots and spaces'];
    expect(two('/api/admin', '/api/Admin')).toEqual(refused);
    expect(two('/api/admin', '/api/admin.')).toEqual(refused);
    expect(two('/api/admin', '/api/admins')).toEqual([]);
  });

  // Mutation check: in src/config/consistency.ts routeProblems, compare `route.path` instead of its
  // decoded form (`const matched = matchedForm(route.path);` → `= route.path;`) → fails.
  it('refuses two routes that differ only in escapes (requests would match both the same way)', () => {
    expect(problems(minimal({ routes: [{ path: '/api/a!b', target: 'https://up:1' }, { path: '/api/a%21b', target: 'https://up:2' }] }))).toEqual([
      'routes[1].path: is used by another route',
    ]);
  });

  // Fails if, in src/config/consistency.ts configProblems, `cfg.server.metricsPort === cfg.server.port` becomes `false`.
  it('refuses server.metricsPort equal to server.port (or to PORT), which would fail at startup as "already in use"', () => {
    const server = (extra: object) => minimal({ server: { publicUrl: 'https://app.example.com', ...extra } });
    const line = 'server.metricsPort: must differ from server.port (PORT overrides server.port)';
    expect(problems(server({ port: 9464, metricsPort: 9464 }))).toEqual([line]);
    expect(problems(server({ metricsPort: 3000 }))).toEqual([line]);
    expect(problems(server({ metricsPort: 8088 }), { PORT: '8088' })).toEqual([line]);
    expect(problems(server({ port: 8080, metricsPort: 9464 }))).toEqual([]);
    expect(problems(server({ port: 0, metricsPort: 0 }))).toEqual([]);
  });

  it('takes server.workers as a count or auto, and refuses more than one with the demo (dev:)', () => {
    expect(parseConfig(minimal({ server: { publicUrl: 'https://app.example.com', workers: 'auto' } }), { env: {} }).server.workers).toBe('auto');
    expect(parseConfig(minimal(), { env: {} }).server.workers).toBe(1);
    expect(problems(minimal({ server: { publicUrl: 'http://localhost:3000', workers: 2 }, dev: {} }))).toEqual([
      'server.workers: must be 1 with dev: (the demo provider and API run in one process)',
    ]);
  });

  // Found by review: a wait past 2^31 - 1 ms fires after 1 ms in Node (a heartbeat every
  // millisecond; a shutdown or body deadline at once). Session lifetimes are Redis TTLs, re-armed
  // in-process, and may be longer. Fails if schema.ts seconds() loses its .max(MAX_TIMER_SECONDS).
  it("refuses waits longer than Node's timers take, one line each; session lifetimes may be longer", () => {
    const server = { publicUrl: 'https://app.example.com', workerUnresponsiveSeconds: 10_000_000, shutdownTimeoutSeconds: 2_147_484, requestBodyTimeoutSeconds: 2_147_483 };
    expect(problems(minimal({ server }))).toEqual([
      "server.shutdownTimeoutSeconds: must be at most 2147483 (24.8 days: Node's timers take no longer)",
      "server.workerUnresponsiveSeconds: must be at most 2147483 (24.8 days: Node's timers take no longer)",
    ]);
    const session = { secrets: [SECRET], encryptionKeys: [KEY], idleTimeoutSeconds: 7_776_000, absoluteTimeoutSeconds: 7_776_000 };
    expect(parseConfig(minimal({ session }), { env: {} }).session.absoluteTimeoutSeconds).toBe(7_776_000);
  });

  it('requires a client secret for the secret-based client authentication methods', () => {
    expect(problems(minimal({ oidc: { issuer: 'https://idp.example.com', clientId: 'bff' } }))).toEqual([
      'oidc.clientSecret: is required for clientAuthMethod client_secret_basic',
    ]);
  });

  it('never prints the value of a secret in a problem line', () => {
    const secret = 'THIS-IS-A-SECRET-VALUE';
    const lines = problems(minimal({ session: { secrets: [secret], encryptionKeys: [secret] } }));
    expect(lines.length).toBe(2);
    expect(lines.join('\n')).not.toContain(secret);
  });

  it('interpolates ${NAME} and ${NAME:-default} in string leaves only', () => {
    const cfg = parseConfig(
      minimal({ oidc: { issuer: '${ISSUER:-https://idp.example.com}', clientId: '${CLIENT_ID}', clientSecret: 'x' } }),
      { env: { CLIENT_ID: 'from-env' } },
    );
    expect(cfg.oidc.clientId).toBe('from-env');
    expect(cfg.oidc.issuer).toBe('https://idp.example.com');
  });

  it('reports an unset variable without a default by its key path', () => {
    expect(problems(minimal({ oidc: { issuer: 'https://i.example', clientId: '${MISSING_ID}', clientSecret: 'x' } }))).toEqual([
      'oidc.clientId: environment variable MISSING_ID is not set',
    ]);
  });

  it('cannot inject YAML structure through an environment value', () => {
    const out = interpolate({ a: '${EVIL}' }, { EVIL: 'x\nb: injected' }, []);
    expect(out).toEqual({ a: 'x\nb: injected' });
  });

  it('lets PORT override server.port', () => {
    expect(parseConfig(minimal(), { env: { PORT: '8088' } }).server.port).toBe(8088);
  });

  it('loads YAML files, resolving static.root against the file and reporting bad YAML by line', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'bff-config-'));
    const good = path.join(dir, 'good.yaml');
    writeFileSync(
      good,
      [
        'server: { publicUrl: "https://app.example.com" }',
        'oidc: { issuer: "https://idp.example.com", clientId: bff, clientSecret: "${SECRET}" }',
        `session: { secrets: ["${SECRET}"], encryptionKeys: ["${KEY}"] }`,
        'static: { root: ./public }',
      ].join('\n'),
    );
    const cfg = loadConfigFile(good, { env: { SECRET: 'from-env-secret' } });
    expect(cfg.oidc.clientSecret).toBe('from-env-secret');
    expect(cfg.static?.root).toBe(path.join(dir, 'public'));

    const bad = path.join(dir, 'bad.yaml');
    writeFileSync(bad, 'server:\n  publicUrl: [unclosed\n');
    expect(() => loadConfigFile(bad, { env: {} })).toThrow(/not valid YAML \(line \d+, column \d+\)/);
    expect(() => loadConfigFile(path.join(dir, 'missing.yaml'), { env: {} })).toThrow(/cannot read the config file \(ENOENT\)/);
  });

  // Fails if, in src/config/load.ts loadConfigFile, the staticRootProblem check is removed: a
  // root of `.` beside the config file served it, secrets and all, to anyone (found by red team).
  it('refuses a static root that holds the config file, or is the filesystem root', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'bff-config-'));
    const file = path.join(dir, 'gateway.yaml');
    const write = (root: string) =>
      writeFileSync(
        file,
        [
          'server: { publicUrl: "https://app.example.com" }',
          'oidc: { issuer: "https://idp.example.com", clientId: bff, clientSecret: top-secret-value }',
          `session: { secrets: ["${SECRET}"], encryptionKeys: ["${KEY}"] }`,
          `static: { root: "${root}" }`,
        ].join('\n'),
      );
    for (const root of ['.', '..', dir]) {
      write(root);
      expect(() => loadConfigFile(file, { env: {} })).toThrow(/static\.root: holds the config file/);
    }
    write('/');
    expect(() => loadConfigFile(file, { env: {} })).toThrow(/static\.root: is the filesystem root/);
    write('./public');
    expect(loadConfigFile(file, { env: {} }).static?.root).toBe(path.join(dir, 'public'));
  });
});

describe('values that only look set', () => {
  const doc = (overrides: { clientSecret?: string; secrets?: string[]; encryptionKeys?: string[] }) =>
    minimal({
      oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientSecret: overrides.clientSecret ?? 'top-secret-value' },
      session: { secrets: overrides.secrets ?? [SECRET], encryptionKeys: overrides.encryptionKeys ?? [KEY] },
    });

  // Fails if, in src/config/interpolate.ts interpolate, the check for a `${` left over is
  // removed: the mistyped placeholder's own text (32+ characters) became the session secret.
  it('refuses a ${...} that is not a placeholder, instead of taking its text as the secret', () => {
    expect(problems(doc({ secrets: ['${SESSION-SECRET-OF-THE-PRODUCTION-GATEWAY}'] }))).toEqual([
      expect.stringMatching(/^session\.secrets\[0\]: has a \$\{\.\.\.\} that is not a placeholder/),
    ]);
    expect(problems(doc({ clientSecret: 'prefix-${ not closed' }))).toEqual([expect.stringMatching(/^oidc\.clientSecret: has a \$\{/)]);
  });

  // Fails if, in src/config/interpolate.ts interpolate, the UNBRACED check goes: the shell's
  // `$NAME` was kept as written, a readable "secret" long enough to pass (found by review).
  it('refuses a value that is an unbraced $NAME, naming the form that is replaced', () => {
    expect(problems(doc({ secrets: ['$SESSION_SECRET_OF_THE_PRODUCTION_GATEWAY'] }))).toEqual([
      'session.secrets[0]: is $SESSION_SECRET_OF_THE_PRODUCTION_GATEWAY, which is not replaced: write ${SESSION_SECRET_OF_THE_PRODUCTION_GATEWAY}',
    ]);
  });

  // Fails if, in src/config/interpolate.ts, every refused $NAME is quoted (the `/^[A-Z][A-Z0-9_]*$/`
  // test → `true`): a literal secret that happens to start with `$` went to stderr (found by
  // the second review).
  it('refuses a literal secret shaped like $Name without printing it', () => {
    const lines = problems(doc({ clientSecret: '$Zk9wQ2rT7vLmPq' }));
    expect(lines).toEqual(['oidc.clientSecret: is an unbraced $NAME (not shown: it may be a secret), which is not replaced: write ${NAME}']);
    expect(lines.join('\n')).not.toContain('Zk9wQ2rT7vLmPq');
  });

  // Fails if, in src/config/interpolate.ts interpolate, `if (fallback?.includes('${'))` goes:
  // with A unset, the client secret was the text `${B}` (the pattern stops at the first `}`).
  it('refuses a nested default (${A:-${B}}), which the shell idiom suggests', () => {
    expect(problems(doc({ clientSecret: '${OIDC_CLIENT_SECRET:-${OIDC_CLIENT_SECRET_OLD}}' }), { OIDC_CLIENT_SECRET_OLD: 'x'.repeat(30) })).toEqual([
      expect.stringMatching(/^oidc\.clientSecret: has a placeholder in the default of OIDC_CLIENT_SECRET: defaults cannot nest/),
    ]);
  });

  // Fails if, in src/config/schema.ts, base64Key32 decodes without the strict pattern again
  // (`BASE64_32.test(v)` → `Buffer.from(v, 'base64').length === 32`): Node's decoder skips
  // what it cannot read, and these decode to 32 bytes of readable text.
  it('refuses an encryption key that is not strict base64 of 32 bytes', () => {
    for (const key of ['{TOKEN-ENCRYPTION-KEY-FOR-THE-PRODUCTION-BFF}', 'our bff token encryption passphrase for prod 20241', `${KEY.slice(0, 20)} ${KEY.slice(20)}`]) {
      expect(problems(doc({ encryptionKeys: [key] }))).toEqual([expect.stringMatching(/^session\.encryptionKeys\[0\]: must be 32 bytes, base64-encoded/)]);
    }
    const bytes = randomBytes(32);
    for (const key of [bytes.toString('base64'), bytes.toString('base64').replace(/=$/, ''), bytes.toString('base64url')]) {
      expect(problems(doc({ encryptionKeys: [key] }))).toEqual([]);
    }
  });

  // Fails if, in src/config/format-issues.ts formatZodIssues, the unrecognized_keys branch goes:
  // Zod's own message quoted the key, here an API key written where `value:` was forgotten.
  // (The passphrase case fails too if nearMiss is replaced by a camelCase pattern, as it first
  // was: found by review.)
  it('never quotes an unknown key that may be a value; names the misspellings of known keys', () => {
    for (const secret of ['sk_live_LEAKED_API_KEY_4242', 'CorrectHorseBatteryStaple', 'hunter']) {
      const lines = problems(minimal({ routes: [{ path: '/legacy', target: 'https://legacy.example.com', auth: 'apiKey', apiKey: { header: 'X-API-Key', [secret]: null } }] }));
      expect(lines.join('\n')).not.toContain(secret);
      expect(lines).toEqual(['routes[0].apiKey.value: is required (expected string)', 'routes[0].apiKey: Unrecognized key: (a key not shown: it may be a value)']);
    }
    const typos = problems(minimal({ sesion: {}, server: { publicUrl: 'https://app.example.com', PublicURL: 'x' }, log: { levle: 'info' } }));
    expect(typos).toEqual(
      expect.arrayContaining(['(root): Unrecognized key: "sesion"', 'server: Unrecognized key: "PublicURL"', 'log: Unrecognized key: "levle"']),
    );
  });
});

describe('a secret written where the config names things (found by red team)', () => {
  const LEAK = 'q7Rk2sVx9LmZ4bTn';

  // Fails if src/config/format-issues.ts formatPath prints every key again
  // (`knownKeys.has(key) || nearMiss(key, knownKeys) ? key : ...` → `key`).
  it("never prints a map's key that may be a value written in a key's place", () => {
    const lines = problems(minimal({ oidc: { ...(minimal().oidc as object), extraAuthParams: { audience: 'https://api.example', [LEAK]: null } } }));
    expect(lines).toEqual(['oidc.extraAuthParams.(a key not shown): Invalid input: expected string, received null']);
  });

  // Fails if src/config/interpolate.ts names every unset variable again.
  it('never prints what lies in a ${...} whose name is not an UPPER_CASE variable name', () => {
    const lines = problems(minimal({ oidc: { ...(minimal().oidc as object), clientSecret: `Xa9!\${${LEAK}}#2f` } }));
    expect(lines.join('\n')).not.toContain(LEAK);
    expect(lines).toEqual([expect.stringMatching(/^oidc\.clientSecret: has a \$\{\.\.\.\} naming an environment variable that is not set \(the name is not shown/)]);
    expect(problems(minimal({ oidc: { ...(minimal().oidc as object), clientSecret: '${OIDC_SECRET}' } }))).toEqual(['oidc.clientSecret: environment variable OIDC_SECRET is not set']);
  });
});

describe('typed placeholders', () => {
  it('turns a value that is exactly one placeholder into a number or boolean when it spells one', () => {
    expect(interpolate({ port: '${P:-3000}', flag: '${F}', name: 'x${P}' }, { F: 'true', P: '8080' }, [])).toEqual({
      port: 8080,
      flag: true,
      name: 'x8080',
    });
  });
  // Fails if, in src/config/load.ts, `if (!result.success && restoreText(...)) result = ...` is
  // removed: `clientSecret: ${X}` with X all digits is refused "expected string, received number".
  it('keeps a placeholder that spells a number or boolean a string where the schema wants a string', () => {
    const digits = '123456789012345678901234567890123456';
    const cfg = parseConfig(
      minimal({
        server: { publicUrl: 'https://app.example.com', port: '${PORT_NUMBER}', trustProxy: '${TRUST}' },
        oidc: { issuer: 'https://idp.example.com', clientId: '${CLIENT_ID}', clientSecret: '${CLIENT_SECRET}', extraAuthParams: { flag: '${FLAG}' } },
        session: { secrets: ['${SESSION_SECRET}'], encryptionKeys: [KEY] },
        redis: { url: 'redis://127.0.0.1:6379', password: '${REDIS_PASSWORD}' },
        routes: [{ path: '/legacy', target: 'https://up.example.com', auth: 'apiKey', apiKey: { header: 'x-api-key', value: '${API_KEY}' }, stripPrefix: '${STRIP}' }],
      }),
      {
        env: {
          PORT_NUMBER: '8080', TRUST: '2', CLIENT_ID: '0042', CLIENT_SECRET: '98765432109876543210', FLAG: 'true',
          SESSION_SECRET: digits, REDIS_PASSWORD: '-12', API_KEY: '31415926535', STRIP: 'true',
        },
      },
    );
    expect(cfg.oidc.clientId).toBe('0042');
    expect(cfg.oidc.clientSecret).toBe('98765432109876543210');
    expect(cfg.oidc.extraAuthParams).toEqual({ flag: 'true' });
    expect(cfg.session.secrets).toEqual([digits]);
    expect(cfg.redis.password).toBe('-12');
    expect(cfg.routes[0]?.apiKey?.value).toBe('31415926535');
    // Where the schema wants a number or boolean, the placeholder still takes that type.
    expect(cfg.server.port).toBe(8080);
    expect(cfg.server.trustProxy).toBe(2);
    expect(cfg.routes[0]?.stripPrefix).toBe(true);
    // A literal number is still not a string, and a placeholder that spells no number is still no port.
    expect(problems(minimal({ oidc: { issuer: 'https://idp.example.com', clientId: 42, clientSecret: 'x' } }))).toEqual([
      expect.stringMatching(/^oidc\.clientId: /),
    ]);
    expect(problems(minimal({ server: { publicUrl: 'https://app.example.com', port: '${P}' } }), { P: 'eighty' })).toEqual([
      expect.stringMatching(/^server\.port: /),
    ]);
  });
  it('keeps secrets that look numeric as strings when they are part of a longer value', () => {
    expect(interpolate({ s: 'k-${N}' }, { N: '123' }, [])).toEqual({ s: 'k-123' });
  });
});
