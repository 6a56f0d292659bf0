/**
 * The real CLI (`node dist/cli.js --config FILE`) as a child process: gateways started exactly
 * the way main.ts starts them (server options, CONNECT handler, metrics port, process handlers).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { stringify as toYaml } from 'yaml';
import { gatewayClient } from './gateway.js';
import { startTestProvider, type TestProvider } from './oidc-provider.js';
import { randomKey, randomSecret } from './config.js';
import { findFreePort, redisUrlForTests } from './redis-server.js';
import { incomingHeaders, rawExchange } from './raw-http.js';
import { startUpstream, type Upstream } from './upstream.js';
import { eventually, withTimeout } from './wait.js';

const ROOT = process.cwd();
export const CLI = path.join(ROOT, 'dist', 'cli.js');
const STARTUP_BOUND_MS = 15_000;

function newestMtime(dir: string, ext: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(full, ext));
    else if (entry.name.endsWith(ext)) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

/** Builds dist/ when it is missing or older than any source file. */
export function ensureBuilt(): void {
  const stale = !existsSync(CLI) || newestMtime(path.join(ROOT, 'src'), '.ts') > statSync(CLI).mtimeMs;
  if (!stale) return;
  const started = Date.now();
  const tsc = spawnSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 180_000,
  });
  console.log(`dist/ was stale: tsc -p tsconfig.build.json exited ${tsc.status} in ${Date.now() - started} ms`);
  // tsc emits even with type errors; only a missing CLI is fatal here.
  if (!existsSync(CLI)) throw new Error(`build failed: ${tsc.stdout}${tsc.stderr}`);
}

export interface Spawned {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  /** True once the process has exited. */
  hasExited: () => boolean;
}

const children = new Set<ChildProcess>();

/** Runs the CLI with the test's environment minus PORT and BFF_CONFIG, plus `env`. */
export function runCli(args: string[], env: Record<string, string> = {}): Spawned {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete childEnv.PORT;
  delete childEnv.BFF_CONFIG;
  const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let out = '';
  let done = false;
  child.stdout?.on('data', (c: Buffer) => (out += c.toString('utf8')));
  child.stderr?.on('data', (c: Buffer) => (out += c.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) => {
    child.once('exit', (code, signal) => {
      done = true;
      children.delete(child);
      resolve({ code, signal, at: performance.now() });
    });
  });
  return { child, output: () => out, exited, hasExited: () => done };
}

/** Kills every CLI process a test started and has not seen exit (afterAll). */
export function killAllCli(): void {
  for (const child of children) child.kill('SIGKILL');
}

/** Re-exported for the tests that import it from here; the one implementation is in wait.ts. */
export { withTimeout };

export function writeConfigFile(dir: string, name: string, doc: unknown): string {
  const file = path.join(dir, name);
  writeFileSync(file, typeof doc === 'string' ? doc : toYaml(doc));
  return file;
}

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

/** One request on a fresh connection (the suite's raw client), so a refused connection is visible. */
export async function request(port: number, pathname: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await rawExchange(`http://127.0.0.1:${port}`, { target: pathname, headers, deadlineMs: 30_000 });
  return { status: res.status, headers: incomingHeaders(res), body: res.text, at: res.at };
}

/** Starts the CLI on `configFile` (with `env` added) and waits (bounded) until `/readyz` on `port` answers 200. */
export async function startCliGateway(configFile: string, port: number, env: Record<string, string> = {}): Promise<Spawned> {
  const proc = runCli(['--config', configFile], env);
  const started = performance.now();
  try {
    await eventually('/readyz 200', STARTUP_BOUND_MS, async () => (await request(port, '/readyz')).status === 200, {
      intervalMs: 100,
      ignoreErrors: true,
      abort: () => (proc.hasExited() ? 'the gateway exited during startup' : undefined),
    });
  } catch (err) {
    throw new Error(`${(err as Error).message}:\n${proc.output()}`);
  }
  console.log(`CLI gateway ready on :${port} in ${Math.round(performance.now() - started)} ms`);
  return proc;
}

/** The test provider's client for the gateway (gatewayClient in gateway.ts), as a CLI config's `oidc`. */
export function cliOidc(issuer: string): Record<string, unknown> {
  return { issuer, clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef', scopes: ['openid', 'profile', 'email', 'offline_access'] };
}

/** Two instances behind one public URL, A's (where the provider sends the browser back and its logouts). */
export interface CliPairPorts {
  portA: number;
  portB: number;
  publicUrl: string;
}

export async function reserveCliPair(): Promise<CliPairPorts> {
  const [portA, portB] = [await findFreePort(), await findFreePort()];
  return { portA, portB, publicUrl: `http://127.0.0.1:${portA}` };
}

export interface CliPair {
  /** A, then B. */
  processes: Spawned[];
  /** The pair's config for another port (and server keys), e.g. for a third process. */
  configFor(port: number, server?: Record<string, unknown>): unknown;
}

/**
 * Starts A and B from `dir`/a.yaml and b.yaml: one config but the listening port (same secrets,
 * keys, Redis prefix and publicUrl, as behind a load balancer).
 */
export async function startCliPair(dir: string, ports: CliPairPorts, shared: Record<string, unknown>): Promise<CliPair> {
  const configFor = (port: number, server: Record<string, unknown> = {}) => ({ server: { port, host: '127.0.0.1', publicUrl: ports.publicUrl, ...server }, ...shared });
  const processes = await Promise.all([
    startCliGateway(writeConfigFile(dir, 'a.yaml', configFor(ports.portA)), ports.portA),
    startCliGateway(writeConfigFile(dir, 'b.yaml', configFor(ports.portB)), ports.portB),
  ]);
  return { processes, configFor };
}

/** Kills every CLI child (afterAll) and waits, boundedly, until `processes` have exited. */
export async function stopCli(processes: readonly Spawned[], ms = 5_000): Promise<void> {
  killAllCli();
  await Promise.all(processes.map((p) => withTimeout(p.exited, ms, 'CLI exit', { fallback: undefined })));
}

/** Lines of the process's JSON log with this event. */
export function logEvents(proc: Spawned, event: string): Array<Record<string, unknown>> {
  return proc
    .output()
    .split('\n')
    .filter((l) => l.includes(`"event":"${event}"`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** The pids of the workers a cluster primary has started (its `worker_started` lines). */
export const workerPids = (proc: Spawned): number[] => logEvents(proc, 'worker_started').map((e) => e.pid as number);

export interface CliFixture {
  /** A temporary folder for config files, removed afterwards. */
  readonly tmp: string;
  readonly provider: TestProvider;
  readonly upstream: Upstream;
  /** A free port whose http://127.0.0.1 origin the provider's client is registered for (a gateway there can sign in). */
  readonly port: number;
  readonly url: string;
}

/**
 * The set-up every suite of CLI gateways shares, registered as beforeAll/afterAll: dist/ built,
 * a temporary folder, an upstream, a free port and a test provider whose client signs in there;
 * afterwards every CLI child is killed and everything closed. Read the fields inside tests and
 * later beforeAll hooks (they exist once this one has run).
 */
export function useCliFixture(name: string): CliFixture {
  const state: { tmp?: string; provider?: TestProvider; upstream?: Upstream; port?: number } = {};
  beforeAll(async () => {
    ensureBuilt();
    state.tmp = mkdtempSync(path.join(os.tmpdir(), `bff-${name}-`));
    state.upstream = await startUpstream();
    state.port = await findFreePort();
    state.provider = await startTestProvider({ clients: [gatewayClient(`http://127.0.0.1:${state.port}`)] });
  }, 200_000);
  afterAll(async () => {
    killAllCli();
    await state.provider?.close();
    await state.upstream?.close();
    if (state.tmp) rmSync(state.tmp, { recursive: true, force: true });
  });
  const required = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is set up in beforeAll`);
    return value;
  };
  return {
    get tmp() {
      return required(state.tmp, 'tmp');
    },
    get provider() {
      return required(state.provider, 'provider');
    },
    get upstream() {
      return required(state.upstream, 'upstream');
    },
    get port() {
      return required(state.port, 'port');
    },
    get url() {
      return `http://127.0.0.1:${required(state.port, 'port')}`;
    },
  };
}

/**
 * A `server.workers: 2` CLI gateway on the fixture's provider and upstream (route `/up`, no
 * sign-in), once both workers have started.
 */
export async function startCliWorkers(
  fixture: CliFixture,
  server: Record<string, unknown> = {},
  redis: Record<string, unknown> = {},
): Promise<{ proc: Spawned; port: number }> {
  const port = await findFreePort();
  const file = writeConfigFile(fixture.tmp, `workers-${port}.yaml`, {
    server: { port, host: '127.0.0.1', publicUrl: `http://127.0.0.1:${port}`, workers: 2, shutdownTimeoutSeconds: 8, ...server },
    oidc: { issuer: fixture.provider.issuer, clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef' },
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `workers${port}:`, ...redis },
    routes: [{ path: '/up', target: fixture.upstream.url, auth: 'none' }],
    log: { level: 'info' },
  });
  const proc = await startCliGateway(file, port);
  await eventually('two workers started', 15_000, () => workerPids(proc).length >= 2);
  return { proc, port };
}
