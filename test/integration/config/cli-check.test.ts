/**
 * `npx bff-gateway --config FILE --check` as a process (SPEC §2): validates and exits, with one
 * line per problem and no secret value ever printed; refuses what is certainly unsafe and warns,
 * one line each, about what may be deliberate (issue 13).
 *
 * Mutation check for the safety tests: make `unsafeSettings` (src/config/safety.ts) return []:
 * the demo-secret config exits 0; make `riskySettings` return []: no warning line is printed.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureBuilt, killAllCli, runCli, writeConfigFile } from '../../support/cli-process.js';
import { findSecrets } from '../../support/secrets.js';
import { withTimeout } from '../../support/wait.js';
import { randomKey, randomSecret } from '../../support/config.js';

let tmp: string;

beforeAll(() => {
  ensureBuilt();
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-check-'));
}, 200_000);

afterAll(() => {
  killAllCli();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const writeConfig = (name: string, doc: unknown) => writeConfigFile(tmp, name, doc);

function goodConfig() {
  return {
    server: { port: 1, host: '127.0.0.1', publicUrl: 'http://127.0.0.1:1' },
    oidc: { issuer: 'http://127.0.0.1:1', clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef' },
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: 'redis://127.0.0.1:1' },
    routes: [{ path: '/slow', target: 'http://127.0.0.1:2', auth: 'none' }],
    log: { level: 'info' },
  };
}

describe('--check', () => {
  const SECRETS = {
    sessionSecret: 'short-SESSION-SECRET-aa11',
    encryptionKey: 'not-a-key-ENCRYPTION-SECRET-bb22',
    clientSecret: 'CLIENT-SECRET-VALUE-cc33',
    redisPassword: 'REDIS-PASSWORD-dd44',
    envSecret: 'ENV-INTERPOLATED-SECRET-ee55',
  };

  function expectNoSecrets(output: string): void {
    // not even a distinctive fragment
    const fragment = (value: string) => value.split('-').filter((p) => p.length >= 5 && /[A-Z]/.test(p))[0];
    const [first] = findSecrets(output, SECRETS, { fragment });
    if (first !== undefined) throw new Error(`${first} was printed`);
  }

  it('exits 1 on a bad config with one line per problem, naming each key path, and prints no secret', async () => {
    const file = writeConfig('bad.yaml', {
      server: { prot: 3000, publicUrl: 'ftp://app.example.com' },
      oidc: {
        issuer: 'https://idp.example.com',
        clientId: 'bff',
        clientSecret: SECRETS.clientSecret,
        clientAuthMethod: 'client_secret_magic',
      },
      session: { secrets: [SECRETS.sessionSecret, '${SOME_SECRET}'], encryptionKeys: [SECRETS.encryptionKey] },
      redis: { url: `http://user:${SECRETS.redisPassword}@127.0.0.1:6379` },
      log: { level: 'loud' },
    });
    const proc = runCli(['--config', file, '--check'], { SOME_SECRET: SECRETS.envSecret });
    const exit = await withTimeout(proc.exited, 15_000, '--check');
    const output = proc.output();
    console.log(`--check on a bad config (exit ${exit.code}):\n${output}`);
    expect(exit.code).toBe(1);
    expectNoSecrets(output);

    const expectedPaths = [
      'server',
      'server.publicUrl',
      'oidc.clientAuthMethod',
      'session.secrets[0]',
      'session.secrets[1]',
      'session.encryptionKeys[0]',
      'redis.url',
      'log.level',
    ];
    const problemLines = output.split('\n').filter((l) => /^\s+\S+: /.test(l));
    for (const p of expectedPaths) {
      const escaped = p.replace(/[.[\]]/g, (c) => `\\${c}`);
      expect(problemLines.filter((l) => new RegExp(`^\\s+${escaped}: `).test(l))).toHaveLength(1);
    }
    expect(problemLines).toHaveLength(expectedPaths.length);
    expect(problemLines.find((l) => l.includes('server:'))).toMatch(/prot/);
  });

  // Fails if, in src/config/schema.ts httpsUnlessLoopback, `URL.canParse(value) &&` is removed
  // (the guard of the old superRefine's `if (!URL.canParse(value)) continue;`): the only output
  // is `bff-gateway: fatal: Invalid URL`, with no key.
  it('exits 1 on a publicUrl that is not a URL with its own line and every other problem, no fatal', async () => {
    const doc = { ...goodConfig(), server: { port: 1, publicUrl: '${PUBLIC_URL}' }, tokens: { refreshSkewSeconds: -1 } };
    const proc = runCli(['--config', writeConfig('not-a-url.yaml', doc), '--check'], { PUBLIC_URL: 'app.example.com' });
    const exit = await withTimeout(proc.exited, 15_000, '--check');
    const output = proc.output();
    expect(exit.code).toBe(1);
    expect(output).not.toMatch(/fatal|Invalid URL|    at /);
    const problemLines = output.split('\n').filter((l) => /^\s+\S+: /.test(l)).map((l) => l.trim());
    expect(problemLines).toEqual(['server.publicUrl: must be an absolute http(s) URL', expect.stringMatching(/^tokens\.refreshSkewSeconds: /)]);
  });

  it('exits 1 on YAML that does not parse, giving the position but not the offending text', async () => {
    const file = writeConfig('broken.yaml', `session:\n  secrets: ["${SECRETS.sessionSecret}\n  encryptionKeys: [${SECRETS.encryptionKey}\n`);
    const proc = runCli(['--config', file, '--check']);
    const exit = await withTimeout(proc.exited, 15_000, '--check');
    const output = proc.output();
    expect(exit.code).toBe(1);
    expectNoSecrets(output);
    expect(output).toMatch(/line \d+/);
  });

  // Found by the TLS red team: the gateway started and sent its client secret and the code to
  // an impostor provider. Fails if src/config/load.ts ignores unsafeEnvironment(env).
  it('exits 1 when NODE_TLS_REJECT_UNAUTHORIZED=0 would make Node accept any certificate, with one line saying so', async () => {
    const proc = runCli(['--config', writeConfig('good-env.yaml', goodConfig()), '--check'], { NODE_TLS_REJECT_UNAUTHORIZED: '0' });
    const exit = await withTimeout(proc.exited, 15_000, '--check');
    expect(exit.code).toBe(1);
    const problemLines = proc.output().split('\n').filter((l) => /^\s+\S+: /.test(l)).map((l) => l.trim());
    expect(problemLines).toEqual([expect.stringMatching(/^NODE_TLS_REJECT_UNAUTHORIZED: 0 makes Node accept any certificate .*NODE_EXTRA_CA_CERTS\)$/)]);
  });

  it('exits 1 on a missing file', async () => {
    const proc = runCli(['--config', path.join(tmp, 'does-not-exist.yaml'), '--check']);
    const exit = await withTimeout(proc.exited, 15_000, '--check');
    expect(exit.code).toBe(1);
    expect(proc.output()).toMatch(/ENOENT/);
  });

  it('exits 0 on a good config without connecting to anything', async () => {
    // Nothing listens there: --check must not try.
    const doc = goodConfig();
    const file = writeConfig('good.yaml', doc);
    const started = performance.now();
    const proc = runCli(['--config', file, '--check']);
    const exit = await withTimeout(proc.exited, 15_000, '--check');
    console.log(`--check on a good config: exit ${exit.code} in ${Math.round(exit.at - started)} ms: ${proc.output().trim()}`);
    expect(exit.code).toBe(0);
    expect(proc.output()).toMatch(/valid/);
    expect(proc.output()).not.toContain(doc.session.secrets[0] as string);
    expect(proc.output()).not.toContain(doc.session.encryptionKeys[0] as string);
  });
});

describe('--check on unsafe and risky settings', () => {
  const DEMO = {
    sessionSecret: 'demo-session-secret-not-for-production-use',
    encryptionKey: 'ZGVtby1vbmx5LWtleS1ub3QtZm9yLXByb2R1Y3Rpb24=',
    clientSecret: 'demo-client-secret-not-for-production',
  };

  it("exits 1 on the demo's published secrets and an all-zero key outside the demo, one line each, quoting none", async () => {
    const doc = {
      ...goodConfig(),
      server: { port: 1, publicUrl: 'https://app.example.com' },
      oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientSecret: DEMO.clientSecret },
      session: { secrets: [DEMO.sessionSecret], encryptionKeys: [DEMO.encryptionKey, Buffer.alloc(32).toString('base64')] },
      dev: {},
    };
    const proc = runCli(['--config', writeConfig('demo-secrets.yaml', doc), '--check']);
    const exit = await withTimeout(proc.exited, 15_000, '--check');
    const output = proc.output();
    console.log(`--check on published secrets (exit ${exit.code}):\n${output}`);
    expect(exit.code).toBe(1);
    const lines = output.split('\n').filter((l) => /^\s+\S+: /.test(l));
    expect(lines.map((l) => l.trim().split(':')[0])).toEqual(['dev', 'session.encryptionKeys[1]']);
    for (const value of Object.values(DEMO)) expect(output).not.toContain(value);

    // Without dev:, the published secrets themselves are the problem.
    const { dev: _dev, ...production } = doc;
    const again = runCli(['--config', writeConfig('demo-secrets-prod.yaml', production), '--check']);
    expect((await withTimeout(again.exited, 15_000, '--check')).code).toBe(1);
    const named = again.output().split('\n').filter((l) => /^\s+\S+: /.test(l)).map((l) => l.trim().split(':')[0]);
    expect(named).toEqual(['session.encryptionKeys[0]', 'session.encryptionKeys[1]', 'session.secrets[0]', 'oidc.clientSecret']);
    for (const value of Object.values(DEMO)) expect(again.output()).not.toContain(value);
  });

  it('exits 0 on cleartext Redis and upstreams on other hosts, with one warning line each', async () => {
    const doc = {
      ...goodConfig(),
      redis: { url: 'redis://10.1.2.3:6379' },
      routes: [{ path: '/api', target: 'http://api.internal:8080', auth: 'user' }],
    };
    const proc = runCli(['--config', writeConfig('cleartext.yaml', doc), '--check']);
    const exit = await withTimeout(proc.exited, 15_000, '--check');
    const output = proc.output();
    console.log(`--check on cleartext hops (exit ${exit.code}):\n${output}`);
    expect(exit.code).toBe(0);
    const warnings = output.split('\n').filter((l) => l.startsWith('bff-gateway: warning: '));
    expect(warnings).toEqual([expect.stringMatching(/warning: redis\.url: /), expect.stringMatching(/warning: routes\[0\]\.target: /)]);
  });
});

describe('the default config file', () => {
  // SPEC §1: `npx bff-gateway [--check]` is `npm start`: without --config or BFF_CONFIG, the
  // shipped config/default.yaml (package.json "files" ships config/ and public/ for it). From an
  // installed package, npx runs the CLI in the user's own project, where no config/ exists:
  // the default must be the package's file, not one looked up in the working directory.
  // Mutation check: src/main.ts's default back to the bare 'config/default.yaml' → this fails.
  it('is the package\'s own config/default.yaml, whatever the working directory', () => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.BFF_CONFIG;
    delete env.PORT;
    const run = spawnSync(process.execPath, [path.resolve('dist/cli.js'), '--check'], { cwd: tmp, env, encoding: 'utf8', timeout: 30_000 });
    expect(`${run.stdout}${run.stderr}`).toMatch(/default\.yaml is valid/);
    expect(run.status).toBe(0);
  });
});
