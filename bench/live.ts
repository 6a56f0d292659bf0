/**
 * `npm run bench:live` (issue 16): the live-sessions scale run.
 *
 *   redis-server (own port)  ←  gateway A (the CLI, one process: holds every socket)
 *                            ←  gateway B (the CLI: only takes the logouts, so that every end
 *                                          reaches A through Redis pub/sub, as across instances)
 *   upstream (child process: WebSocket server)  ←  A
 *   dev provider (in this process, for the sign-ins); this process is also the loader
 *
 * 1. Sign in SESSIONS sessions, each of its own user; on A open, per session, WS_PER_SESSION
 *    proxied WebSockets and one GET /auth/events stream (default 320 × (30 + 1) = 9,920 held
 *    streams: a session may hold 32 WebSockets and proxied streams per process, a user 128).
 * 2. Idle window: Redis INFO commandstats delta over WINDOW seconds (the INFO/CONFIG calls of
 *    this measurement subtracted): Redis commands per second for the idle sockets (target 0).
 * 3. Memory: A's resident set and V8 heap (its /metrics) before and after opening them: per socket.
 * 4. Logout ENDING sessions at once through B (default 32 × 31 = 992 streams): the time from
 *    each logout request to each of its sockets' close, seen by the loader: p50/p99/max.
 *
 * Each proxied WebSocket holds two sockets in the gateway (browser side and upstream side), and
 * the open-file limit here is 20,000 (hard, not raisable in this container): 10,000 proxied
 * WebSockets need 20,000 plus the process's own (so 9,600 here, and 320 event streams, which
 * have no upstream side).
 *
 *   --sessions N   (default 320)   --ws N (per session, default 30)   --window S (default 30)
 *   --ending N     sessions logged out in step 4 (default 32)
 *
 * Results on stdout and in bench/results/live.json. Every child is killed at the end.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'ws';
import { BrowserClient } from '../test/support/browser-client.js';
import { randomKey, randomSecret } from '../test/support/config.js';
import { signIn } from '../test/support/drive-login.js';
import { gatewayClient } from '../test/support/gateway.js';
import { startTestProvider } from '../test/support/oidc-provider.js';
import { findFreePort, startRedisServer } from '../test/support/redis-server.js';
import { eventually, withTimeout } from '../test/support/wait.js';
import { killAllChildren, startChild } from './lib/ipc.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const RESULTS = path.resolve('bench/results/live.json');

function arg(flag: string, def: number): number {
  const i = process.argv.indexOf(flag);
  const v = i < 0 ? def : Number(process.argv[i + 1]);
  if (!Number.isSafeInteger(v) || v <= 0) throw new Error(`${flag} must be a positive integer`);
  return v;
}

const SESSIONS = arg('--sessions', 320);
const WS_PER_SESSION = arg('--ws', 30);
const WINDOW_S = arg('--window', 30);
const ENDING = Math.min(arg('--ending', 32), SESSIONS);
/** One user per session: a user holds at most 128 streams per process (proxy/streams.ts). */
const USERS = Array.from({ length: SESSIONS }, (_, i) => ({ id: `user${i}`, password: `user${i}-password`, claims: { name: `User ${i}`, email: `user${i}@example.com` } }));
const OPEN_BATCH = 200;

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
const round = (v: number, d = 1) => Math.round(v * 10 ** d) / 10 ** d;

async function metricsOf(port: number): Promise<{ rss: number; heap: number }> {
  const text = await new Promise<string>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/metrics', agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1]);
  return { rss: value('bff_process_resident_memory_bytes'), heap: value('bff_nodejs_heap_size_used_bytes') };
}

/** The CLI, as production starts it (dist/ is built by `npm ci`); the config file is JSON (YAML's subset). */
function startCli(file: string): { child: ChildProcess; output: () => string; exited: Promise<void> } {
  const child = spawn(process.execPath, [path.resolve('dist/cli.js'), '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (c: Buffer) => (out = (out + c.toString('utf8')).slice(-4000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, output: () => out, exited };
}
const gateways: ChildProcess[] = [];
const killAllCli = () => gateways.forEach((c) => c.exitCode === null && c.kill('SIGKILL'));

interface Held {
  closedAt: Promise<number>;
  isClosed(): boolean;
}

/** A close time promise plus a flag read synchronously (a race against a resolved promise would not tell). */
function closeWatch(): { closedAt: Promise<number>; isClosed(): boolean; close(): void } {
  let closed = false;
  let settle: (at: number) => void = () => undefined;
  const closedAt = new Promise<number>((r) => (settle = r));
  return {
    closedAt,
    isClosed: () => closed,
    close() {
      if (closed) return;
      closed = true;
      settle(performance.now());
    },
  };
}

function openWs(port: number, cookie: string, origin: string): Promise<Held> {
  return withTimeout(
    new Promise<Held>((resolve, reject) => {
      const socket = new WebSocket(`ws://127.0.0.1:${port}/live/socket`, { headers: { cookie, origin }, perMessageDeflate: false });
      const watch = closeWatch();
      socket.once('close', watch.close);
      socket.on('error', (err) => {
        if (socket.readyState !== WebSocket.OPEN) reject(err);
      });
      socket.once('open', () => resolve(watch));
    }),
    30_000,
    'a WebSocket to open',
  );
}

function openEvents(port: number, cookie: string): Promise<Held> {
  return withTimeout(
    new Promise<Held>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/auth/events', headers: { cookie }, agent: false });
      req.once('error', reject);
      req.once('response', (res) => {
        if (res.statusCode !== 200) return reject(new Error(`/auth/events answered ${res.statusCode}`));
        const watch = closeWatch();
        res.once('close', watch.close);
        res.resume();
        resolve(watch);
      });
    }),
    30_000,
    'an event stream to open',
  );
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-bench-live-'));
  const redis = await startRedisServer();
  const upstream = await startChild<{ url: string }>({ name: 'live-upstream', module: path.join(HERE, 'servers', 'live-upstream.js'), options: {} });
  const [portA, portB] = [await findFreePort(), await findFreePort()];
  const publicUrl = `http://127.0.0.1:${portA}`;
  const provider = await startTestProvider({ users: USERS, clients: [gatewayClient(publicUrl)] });
  const processes: Array<ReturnType<typeof startCli>> = [];
  try {
    const shared = {
      oidc: { issuer: provider.issuer, clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef', scopes: ['openid', 'profile', 'email', 'offline_access'] },
      session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
      redis: { url: redis.url, keyPrefix: 'live-bench:' },
      // A route holds maxConnections WebSockets at most (512 by default): room for them all.
      routes: [{ path: '/live', target: upstream.info.url, auth: 'user', websocket: true, maxConnections: 16_384 }],
      // The sign-ins all come from this one address.
      rateLimit: { loginPerMinute: 100_000 },
      log: { level: 'warn' },
    };
    for (const [name, port] of [['a', portA], ['b', portB]] as const) {
      const file = path.join(tmp, `${name}.json`);
      writeFileSync(file, JSON.stringify({ server: { port, host: '127.0.0.1', publicUrl }, ...shared }));
      const proc = startCli(file);
      processes.push(proc);
      gateways.push(proc.child);
      await eventually(`gateway ${name}`, 30_000, async () => (await metricsOf(port)).rss > 0, {
        ignoreErrors: true,
        abort: () => (proc.child.exitCode !== null ? `gateway ${name} exited: ${proc.output()}` : undefined),
      });
    }

    // 1. Sessions and their sockets.
    let started = performance.now();
    const cookies: string[] = [];
    for (let i = 0; i < SESSIONS; i++) {
      const client = new BrowserClient();
      const user = USERS[i] as (typeof USERS)[number];
      await signIn(client, publicUrl, { user: user.id, password: user.password });
      cookies.push(
        Object.entries(client.cookies(publicUrl))
          .map(([n, v]) => `${n}=${v}`)
          .join('; '),
      );
    }
    console.log(`${SESSIONS} sessions signed in in ${Math.round(performance.now() - started)} ms`);

    const before = await metricsOf(portA);
    started = performance.now();
    const held: Held[][] = cookies.map(() => []);
    const jobs: Array<() => Promise<void>> = [];
    cookies.forEach((cookie, s) => {
      jobs.push(async () => void (held[s] as Held[]).push(await openEvents(portA, cookie)));
      for (let w = 0; w < WS_PER_SESSION; w++) jobs.push(async () => void (held[s] as Held[]).push(await openWs(portA, cookie, publicUrl)));
    });
    for (let i = 0; i < jobs.length; i += OPEN_BATCH) await Promise.all(jobs.slice(i, i + OPEN_BATCH).map((job) => job()));
    const total = held.reduce((n, h) => n + h.length, 0);
    const wsCount = SESSIONS * WS_PER_SESSION;
    console.log(`${total} streams open on one gateway process (${wsCount} WebSockets, ${SESSIONS} event streams) in ${Math.round(performance.now() - started)} ms`);
    const upstreamSockets = await upstream.call<number>('websockets');

    // 3. Memory (read now, before the idle window lets the heap settle further).
    await new Promise((r) => setTimeout(r, 3000));
    const after = await metricsOf(portA);

    // 2. Idle window: every Redis command, minus this measurement's own.
    await redis.resetStats();
    await new Promise((r) => setTimeout(r, WINDOW_S * 1000));
    const stats = await redis.commandStats();
    const own = (stats.info ?? 0) + (stats['config|resetstat'] ?? 0) + (stats.client ?? 0) + (stats.hello ?? 0);
    const commands = Object.values(stats).reduce((a, b) => a + b, 0) - own;
    const closedDuringWindow = held.flat().filter((h) => h.isClosed()).length;

    // 4. End ENDING sessions at once through B; time each of their streams' close on A.
    const ending = cookies.slice(0, ENDING);
    const sent: number[] = [];
    await Promise.all(
      ending.map(async (cookie, s) => {
        const client = new BrowserClient();
        sent[s] = performance.now();
        const res = await client.post(`http://127.0.0.1:${portB}/auth/logout`, { headers: { cookie, 'x-csrf': '1' } });
        if (res.status !== 200) throw new Error(`logout answered ${res.status}`);
      }),
    );
    const delays = (
      await Promise.all(
        ending.map((_, s) =>
          withTimeout(Promise.all((held[s] as Held[]).map((h) => h.closedAt)), 30_000, 'the ended sessions\' streams to close').then((closes) =>
            closes.map((at) => at - (sent[s] as number)),
          ),
        ),
      )
    )
      .flat()
      .sort((a, b) => a - b);
    const othersClosed = held.slice(ENDING).flat().filter((h) => h.isClosed()).length;

    const result = {
      at: new Date().toISOString(),
      node: process.version,
      streamsHeld: total,
      webSockets: wsCount,
      eventStreams: SESSIONS,
      sessions: SESSIONS,
      upstreamWebSockets: upstreamSockets,
      idleWindowSeconds: WINDOW_S,
      redisCommandsInWindow: commands,
      redisCommandsPerSecond: round(commands / WINDOW_S, 3),
      redisCommandsByName: Object.fromEntries(Object.entries(stats).filter(([, n]) => n > 0)),
      closedDuringIdleWindow: closedDuringWindow,
      gatewayRssBytesBefore: before.rss,
      gatewayRssBytesAfter: after.rss,
      rssPerStreamBytes: Math.round((after.rss - before.rss) / total),
      heapPerStreamBytes: Math.round((after.heap - before.heap) / total),
      endedSessions: ENDING,
      closesMeasured: delays.length,
      logoutToCloseMs: { p50: round(quantile(delays, 0.5)), p99: round(quantile(delays, 0.99)), max: round(delays[delays.length - 1] ?? NaN) },
      otherSessionsStreamsClosed: othersClosed,
    };
    console.log(JSON.stringify(result, null, 2));
    mkdirSync(path.dirname(RESULTS), { recursive: true });
    writeFileSync(RESULTS, `${JSON.stringify(result, null, 2)}\n`);
  } finally {
    killAllCli();
    await Promise.all(processes.map((p) => withTimeout(p.exited, 5_000, 'gateway exit', { fallback: undefined })));
    await upstream.stop().catch(() => undefined);
    killAllChildren();
    await provider.close();
    await redis.close();
    rmSync(tmp, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    killAllCli();
    killAllChildren();
    process.exit(1);
  },
);
