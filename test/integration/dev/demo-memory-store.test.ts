/**
 * The demo's in-memory fallback (SPEC §1): `npm start` (`node dist/cli.js`, no arguments, so
 * config/default.yaml) on a machine with no Redis must still sign in, proxy and refresh, and say
 * loudly in its log that sessions live in memory. The CLI runs as a child process with REDIS_URL
 * on a closed port (127.0.0.1:1) and PORT / DEV_IDP_PORT / DEV_API_PORT on free ports, exactly
 * as a user would start it; nothing else about the config changes.
 *
 * The dev provider's access tokens live 600 s; DEV_IDP_ACCESS_TOKEN_TTL (src/dev/idp.ts) makes
 * them live 12 s here, so with the default refreshSkewSeconds (30) a token is due for refresh
 * halfway through its life (session/tokens.ts renewalMargin), 6 s after it is issued: the test
 * waits for that moment, bounded, on the token's own `exp`.
 *
 * Mutation check (done by hand once, in a throwaway worktree): src/demo.ts, createRuntime:
 * `if (!(err instanceof StartupError) || !dev.memoryStoreFallback) throw err;` → `throw err;`
 * (no fallback): the CLI exits "cannot start" and this test fails.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { BrowserClient } from '../../support/browser-client.js';
import { CLI, ensureBuilt, request } from '../../support/cli-process.js';
import { signIn } from '../../support/drive-login.js';
import { findFreePort } from '../../support/redis-server.js';
import type { DemoApiAnswer } from '../../../src/dev/demo-api.js';
import { renewalMargin } from '../../../src/session/tokens.js';

const ACCESS_TOKEN_TTL_SECONDS = 12;
/** config/default.yaml sets no tokens section: the schema's default skew applies. */
const DEFAULT_REFRESH_SKEW_SECONDS = 30;
const STARTUP_BOUND_MS = 20_000;
const csrf = { 'x-csrf': '1', accept: 'application/json' };

let child: ChildProcess | undefined;
let output = '';
let exitedWith: string | undefined;
let gatewayUrl: string;

/** Starts `npm start` on fresh free ports and waits (bounded) for /readyz; false if a port was taken. */
async function startNpmStart(): Promise<boolean> {
  const [port, idpPort, apiPort] = [await findFreePort(), await findFreePort(), await findFreePort()];
  gatewayUrl = `http://localhost:${port}`;
  output = '';
  exitedWith = undefined;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    DEV_IDP_PORT: String(idpPort),
    DEV_API_PORT: String(apiPort),
    HOST: '127.0.0.1',
    // Port 1: privileged, so nothing a test run starts can be listening there.
    REDIS_URL: 'redis://127.0.0.1:1',
    LOG_LEVEL: 'info',
    DEV_IDP_ACCESS_TOKEN_TTL: String(ACCESS_TOKEN_TTL_SECONDS),
  };
  delete env.BFF_CONFIG;
  // `npm start` is `node dist/cli.js`: no --config, so config/default.yaml.
  const started = spawn(process.execPath, [CLI], { cwd: process.cwd(), env, stdio: ['ignore', 'pipe', 'pipe'] });
  child = started;
  started.stdout?.on('data', (c: Buffer) => (output += c.toString('utf8')));
  started.stderr?.on('data', (c: Buffer) => (output += c.toString('utf8')));
  started.once('exit', (code, signal) => (exitedWith = `code ${code}, signal ${signal}`));

  const deadline = performance.now() + STARTUP_BOUND_MS;
  for (;;) {
    // The ports were free when asked for, but someone may have bound one since.
    if (/EADDRINUSE/.test(output)) {
      if (!exitedWith) started.kill('SIGKILL');
      return false;
    }
    if (exitedWith) throw new Error(`npm start exited during startup (${exitedWith}):\n${output}`);
    const ready = await request(port, '/readyz').catch(() => undefined);
    if (ready?.status === 200) return true;
    if (performance.now() > deadline) throw new Error(`npm start not ready within ${STARTUP_BOUND_MS} ms:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  ensureBuilt();
  if (!(await startNpmStart()) && !(await startNpmStart())) throw new Error(`npm start: ports taken twice:\n${output}`);
}, 200_000);

afterAll(async () => {
  const running = child;
  if (!running || exitedWith) return;
  // SIGTERM, as a user stops `npm start`: the gateway closes its idle keep-alive connections
  // first, so none of this worker's sockets outlive it. Bounded, then SIGKILL. 'close', not
  // 'exit': its pipes are closed too.
  const closed = new Promise<void>((resolve) => running.once('close', () => resolve()));
  const within = (ms: number) => Promise.race([closed.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms).unref())]);
  running.kill('SIGTERM');
  if (await within(10_000)) return;
  running.kill('SIGKILL');
  await within(5_000);
});

async function hello(client: BrowserClient): Promise<DemoApiAnswer> {
  const res = await client.get(`${gatewayUrl}/api/hello`, { headers: csrf });
  expect(res.status).toBe(200);
  return res.json<DemoApiAnswer>();
}

const refreshesLogged = () => output.split('\n').filter((line) => line.includes('"event":"token_refresh","outcome":"success"')).length;

async function untilLogged(check: () => boolean): Promise<void> {
  const giveUpAt = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > giveUpAt) throw new Error(`not logged within 5 s:\n${output.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Waits (bounded by the token's lifetime) until the gateway must see this expiry as due for refresh. */
async function untilDueForRefresh(expiresAt: string): Promise<void> {
  // The gateway's expiresAt is its own floor(now) + expires_in: up to a second after the `exp`
  // the provider wrote, hence the extra second.
  const due = Date.parse(expiresAt) - renewalMargin({ lifetime: ACCESS_TOKEN_TTL_SECONDS }, DEFAULT_REFRESH_SKEW_SECONDS) * 1000 + 1_050;
  const giveUpAt = Date.now() + (ACCESS_TOKEN_TTL_SECONDS + 2) * 1000;
  while (Date.now() < due) {
    if (Date.now() > giveUpAt) throw new Error(`the token's refresh moment (${expiresAt}) did not come within its lifetime`);
    await new Promise((r) => setTimeout(r, Math.min(250, Math.max(10, due - Date.now()))));
  }
}

describe('npm start with no Redis (config/default.yaml, REDIS_URL on a closed port)', () => {
  it('says loudly, at warn level, that sessions are in memory', () => {
    const fallback = output.split('\n').find((line) => line.includes('"event":"memory_store_fallback"'));
    expect(fallback).toBeDefined();
    expect(fallback).toContain('"level":40');
    expect(fallback).toMatch(/!!! NO REDIS: the demo runs on an IN-MEMORY session store/);
  });

  it('signs in through the dev provider, proxies /api/hello with a token the demo API accepts, and refreshes it when due', async () => {
    const client = new BrowserClient();
    await signIn(client, gatewayUrl);
    expect((await client.get(`${gatewayUrl}/auth/user`, { headers: csrf })).status).toBe(200);

    const first = await hello(client);
    expect(first.subject).toBe('alice');
    expect(first.scopes).toContain('api:read');
    expect(first.expiresAt).not.toBeNull();

    await untilDueForRefresh(first.expiresAt as string);
    const refreshesBefore = refreshesLogged();
    const second = await hello(client);
    expect(second.subject).toBe('alice');
    // A new token: it expires later than the first one did, and the gateway logged the refresh.
    expect(Date.parse(second.expiresAt as string)).toBeGreaterThan(Date.parse(first.expiresAt as string));
    // The log comes over a pipe, the answer over a socket: wait (bounded) for the line to arrive.
    await untilLogged(() => refreshesLogged() > refreshesBefore);
    expect(refreshesLogged()).toBe(refreshesBefore + 1);

    // The refreshed session keeps working.
    expect((await hello(client)).expiresAt).toBe(second.expiresAt);
    expect(exitedWith).toBeUndefined();
  }, 60_000);
});
