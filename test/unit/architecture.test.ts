/**
 * The shape of the code, checked: which module may import which library or layer as a value
 * (DESIGN §3.3). Type-only imports are allowed everywhere.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const SRC = path.resolve('src');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? sources(full) : name.endsWith('.ts') ? [full] : [];
  });
}

interface Import {
  file: string;
  specifier: string;
}

const IMPORT = /(^|\n)\s*(import|export)\s+(?!type\b)([^;]*?)\sfrom\s+['"]([^'"]+)['"]/g;
const DYNAMIC = /import\(\s*['"]([^'"]+)['"]\s*\)/g;

function valueImports(): Import[] {
  return sources(SRC).flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    const rel = path.relative(SRC, file).split(path.sep).join('/');
    const found: Import[] = [];
    for (const m of text.matchAll(IMPORT)) {
      const clause = m[3] ?? '';
      // `import { type A, type B } from` is type-only too.
      if (/^\{[^}]*\}$/.test(clause.trim()) && clause.replace(/[{}\s]/g, '').split(',').every((p) => p.startsWith('type'))) continue;
      found.push({ file: rel, specifier: m[4] as string });
    }
    for (const m of text.matchAll(DYNAMIC)) found.push({ file: rel, specifier: m[1] as string });
    return found;
  });
}

/** The layer (top folder or file) a specifier relative to `file` points at. */
function layerOf(file: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
  return target.split('/')[0]?.replace(/\.js$/, '');
}

const imports = valueImports();
const offenders = (test: (i: Import) => boolean) => imports.filter(test).map((i) => `${i.file} → ${i.specifier}`);

describe('architecture', () => {
  it('scans a real source tree', () => {
    expect(imports.length).toBeGreaterThan(50);
  });

  it.each([
    ['express', /^(http\/|app\.ts$|dev\/)/],
    ['express-session', /^(http\/session-cookie\.ts|session\/store\.ts)$/],
    ['openid-client', /^oidc\//],
    ['jose', /^(oidc\/|dev\/)/],
    ['http-proxy-middleware', /^proxy\/upstream\.ts$/],
    ['ioredis', /^redis\/client\.ts$/],
    ['ioredis-mock', /^redis\/memory\.ts$/],
    ['cookie-signature', /^http\/session-cookie\.ts$/],
    ['pino', /^observability\/logger\.ts$/],
    ['prom-client', /^observability\/metrics\.ts$/],
    // Every @opentelemetry package: tracing.ts wraps them in the gateway's own small interface.
    ['@opentelemetry', /^observability\/tracing\.ts$/],
    ['helmet', /^http\/security-headers\.ts$/],
    ['oidc-provider', /^dev\//],
  ])('imports %s only from its one home', (library, home) => {
    expect(offenders((i) => (i.specifier === library || i.specifier.startsWith(`${library}/`)) && !home.test(i.file))).toEqual([]);
  });

  it.each([
    // errors.ts and clock.ts: leaves every layer may use.
    ['config', ['errors', 'clock']],
    ['crypto', ['errors', 'clock']],
    ['redis', ['errors', 'clock', 'config']],
    // oidc → crypto: token-endpoint DPoP proofs use the session key's format (crypto/dpop.ts, pure).
    ['oidc', ['errors', 'clock', 'config', 'crypto']],
    ['session', ['errors', 'clock', 'config', 'crypto', 'redis']],
    ['proxy', ['errors', 'clock', 'config', 'crypto', 'redis', 'session', 'oidc']],
    ['dev', []],
  ])('lets %s depend only on %j (besides itself)', (layer, allowed) => {
    expect(
      offenders((i) => {
        if (!i.file.startsWith(`${layer}/`)) return false;
        const target = layerOf(i.file, i.specifier);
        return target !== undefined && target !== layer && !allowed.includes(target);
      }),
    ).toEqual([]);
  });

  it('keeps process.* in the process edge (main.ts, cli.ts, a cluster worker\'s side of worker-ipc.ts, process-env.ts) and the demo', () => {
    const users = sources(SRC)
      .filter((f) => /\bprocess\.(env|argv|exit|on|once|stdout|stderr)\b/.test(readFileSync(f, 'utf8')))
      .map((f) => path.relative(SRC, f).split(path.sep).join('/'))
      .filter((f) => !/^(main\.ts|cli\.ts|worker-ipc\.ts|process-env\.ts|dev\/)/.test(f));
    expect(users).toEqual([]);
  });

  // A wait's deadline on the wall clock lasted as long as a step of the host's clock (a refresh
  // waiting 5 s for another process's set polled for an hour after a step back of an hour;
  // found by red team). Wall time is read where it is compared with what tokens say.
  it('measures in-process waits on performance.now: Date.now() only where JWT times are read', () => {
    const users = sources(SRC)
      .filter((f) => /Date\.now\(\)/.test(readFileSync(f, 'utf8')))
      .map((f) => path.relative(SRC, f).split(path.sep).join('/'))
      .filter((f) => !/^(dev\/|oidc\/id-token\.ts$|http\/session-routes\.ts$)/.test(f));
    expect(users).toEqual([]);
  });

  it('never logs through console.* outside the demo', () => {
    const users = sources(SRC)
      .filter((f) => /console\.(log|info|warn|error|debug)\(/.test(readFileSync(f, 'utf8')))
      .map((f) => path.relative(SRC, f))
      .filter((f) => !f.startsWith('dev'));
    expect(users).toEqual([]);
  });
});
