/**
 * `npm run bench:instructions`: machine instructions per proxied call, gateway against the raw
 * node:http proxy (bench/servers/raw.ts), counted by valgrind's callgrind in each server's own
 * process. A shared machine makes req/s and even CPU µs swing from run to run; the number of
 * instructions a fixed number of calls executes does not depend on what else runs, so it is
 * what each hot-path change is decided on (issue 17). `npm run bench` confirms with req/s.
 *
 *   redis-server, upstream echo server, provider: plain processes
 *   gateway, raw-node: `valgrind --tool=callgrind --instr-atstart=no node ...`
 *
 * Per target: warm-up calls with the instrumentation off (V8 tiers the hot functions up the
 * same way, only faster), then instrumentation on, counters zeroed, exactly `--calls` calls at a
 * fixed concurrency from this process (keep-alive), and a dump: Ir / calls. Callgrind counts
 * every thread of the process (V8's compiler and GC helpers included).
 *
 *   --calls N          measured calls per target (default 4000)
 *   --warmup N         warm-up calls per target (default 4000)
 *   --connections C    concurrent keep-alive connections (default 8)
 *   --dpop-session     the gateway also has the DPoP route (as in `npm run bench`), so its one
 *                      session is DPoP-bound; the Bearer route `/api` is still what is counted
 *   --floors           also count the floors under the gateway (bench/servers/floor.ts): the
 *                      http-proxy-middleware engine alone from node:http, as mounted (hpm) and
 *                      called as the gateway calls it (httpxy), and these and the raw proxy
 *                      with one GETEX of a session-record-sized value per call
 *   --chunked          the upstream answers chunked, without Content-Length (as streaming or
 *                      compressing frameworks do); the gateway then checks whether to hold
 *                      the answer with its session (src/proxy/streams.ts)
 *   --cpu              no valgrind: CPU time (user + system, /proc) per call of each server
 *                      instead, kernel included, in --rounds rounds (default 5) whose order
 *                      rotates; the median per target. One core's throughput is 1 / this
 *   --profile          no valgrind: a V8 CPU profile of each server over the measured calls
 *                      instead (which JavaScript the instructions go to), written to
 *                      bench/results/instructions-<target>.cpuprofile and summarised
 *
 * BENCH_CALLGRIND_DIR=dir keeps the dumps there: `callgrind_annotate dir/callgrind.<pid>.1`
 * names V8's builtins and Node's native frames (JIT-compiled JavaScript shows as addresses; the
 * CPU profiles of `npm run bench` name those).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BrowserClient } from '../test/support/browser-client.js';
import { signIn } from '../test/support/drive-login.js';
import { findFreePort, startRedisServer, type RedisServer } from '../test/support/redis-server.js';
import { positiveFlag } from './lib/args.js';
import { benchGatewayClient, benchSessionKeys } from './lib/gateway-config.js';
import { killAllChildren, startChild, type BenchChild } from './lib/ipc.js';
import { summarizeProfile } from './lib/profile.js';
import { median, textTable } from './lib/stats.js';
import { cpuMs } from './lib/cpu.js';
import type { GatewayOptions } from './servers/gateway.js';
import { startFloors } from './floors.js';

const HOST = '127.0.0.1';
const here = path.dirname(fileURLToPath(import.meta.url));
const moduleOf = (name: string) => path.join(here, `${name}.js`);
const repoRoot = path.resolve(here, '../..');
const resultsDir = path.join(repoRoot, 'bench', 'results');
const CLIENT = { id: 'bff-bench', secret: 'bff-bench-secret-0123456789abcdef' };

interface Settings {
  calls: number;
  warmup: number;
  connections: number;
  profile: boolean;
  dpopSession: boolean;
  floors: boolean;
  cpu: boolean;
  rounds: number;
  chunked: boolean;
}

function parseArgs(argv: string[]): Settings {
  const num = (flag: string, def: number) => positiveFlag(argv, flag, def, 'integer');
  for (let i = 0; i < argv.length; i++) {
    if (['--profile', '--dpop-session', '--floors', '--cpu', '--chunked'].includes(argv[i] as string)) continue;
    if (!['--calls', '--warmup', '--connections', '--rounds'].includes(argv[i] as string)) {
      throw new Error(`unknown argument ${argv[i]}\nusage: npm run bench:instructions -- [--calls N] [--warmup N] [--connections C] [--rounds N] [--profile | --cpu] [--dpop-session] [--floors] [--chunked]`);
    }
    i++;
  }
  return { calls: num('--calls', 4000), warmup: num('--warmup', 8000), connections: num('--connections', 8), profile: argv.includes('--profile'), dpopSession: argv.includes('--dpop-session'), floors: argv.includes('--floors'), cpu: argv.includes('--cpu'), rounds: num('--rounds', 5), chunked: argv.includes('--chunked') };
}

function log(line: string): void {
  process.stderr.write(`[instructions ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
}

/** `total` GETs of `url` over `connections` keep-alive connections; rejects on any non-200. */
async function drive(url: string, headers: Record<string, string>, total: number, connections: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  let issued = 0;
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.get(url, { agent, headers, timeout: 120_000 }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`${url} answered ${res.statusCode}`))));
      });
      req.on('timeout', () => req.destroy(new Error(`${url}: no answer within 120 s`)));
      req.on('error', reject);
    });
  const loop = async () => {
    while (issued < total) {
      issued++;
      await one();
    }
  };
  try {
    await Promise.all(Array.from({ length: connections }, loop));
  } finally {
    agent.destroy();
  }
}

function callgrindControl(args: string[]): string {
  return execFileSync('callgrind_control', args, { encoding: 'utf8', timeout: 120_000 });
}

/**
 * Ir of the main thread (the event loop: every call's JavaScript, parsing, and the GC work it
 * does itself) in the first dump of `pid`, and of all threads. The other threads are V8's
 * background compiler and GC helpers: when they run depends on timing, so they make the total
 * noisy; the main thread's count is the decision measure.
 */
function dumpedInstructions(dir: string, pid: number): { main: number; all: number } {
  const dumps = readdirSync(dir).filter((f) => f.startsWith(`callgrind.${pid}.1-`));
  if (dumps.length === 0) throw new Error(`no callgrind dump for ${pid} in ${dir}`);
  const ir = (file: string) => {
    const m = /^(?:summary|totals):\s*(\d+)/m.exec(readFileSync(path.join(dir, file), 'utf8'));
    if (!m) throw new Error(`no summary line in ${file}`);
    return Number(m[1]);
  };
  return { main: ir(`callgrind.${pid}.1-01`), all: dumps.reduce((sum, f) => sum + ir(f), 0) };
}

/** The --profile variant: a CPU profile over the measured calls, summarised per call. */
async function profileCalls(child: BenchChild, url: string, headers: Record<string, string>, s: Settings): Promise<string> {
  await drive(url, headers, s.warmup, s.connections);
  const file = path.join(resultsDir, `instructions-${child.name}.cpuprofile`);
  await child.call('profileStart', { samplingIntervalUs: 100 });
  await drive(url, headers, s.calls, s.connections);
  await child.call('profileStop', { file }, 60_000);
  const p = summarizeProfile(file, repoRoot, 25);
  const us = (ms: number) => ((ms * 1000) / s.calls).toFixed(1);
  return [
    `${child.name}: ${us(p.busyMs)} µs busy per call (profiler on), ${path.relative(repoRoot, file)}`,
    textTable(['function', 'location', 'µs/call'], p.top.map((e) => [e.function, e.location || e.category, us(e.selfMs)])),
    textTable(['owner', 'µs/call'], p.byOwner.slice(0, 16).map((o) => [o.owner, us(o.selfMs)])),
  ].join('\n');
}

/**
 * The --cpu variant: each server's CPU time (user + system, kernel included) per call, measured
 * around `calls` calls in each of `rounds` rounds whose order rotates, so machine drift hits all
 * targets alike; the median per target, and the raw proxy's figure over each.
 */
async function cpuPerCall(targets: BenchChild<{ url: string }>[], headers: Record<string, string>, s: Settings): Promise<string> {
  for (const t of targets) {
    log(`${t.name}: ${s.warmup} warm-up calls`);
    await drive(`${t.info.url}/api/echo`, headers, s.warmup, s.connections);
  }
  const perCall = new Map<string, number[]>(targets.map((t) => [t.name, []]));
  for (let round = 0; round < s.rounds; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length] as BenchChild<{ url: string }>);
    for (const t of order) {
      const before = cpuMs(t.pid);
      await drive(`${t.info.url}/api/echo`, headers, s.calls, s.connections);
      const after = cpuMs(t.pid);
      if (before === undefined || after === undefined) throw new Error(`no CPU time for ${t.name} (pid ${t.pid})`);
      perCall.get(t.name)?.push(((after - before) * 1000) / s.calls);
    }
    log(`round ${round + 1}/${s.rounds}: ${targets.map((t) => `${t.name} ${(perCall.get(t.name)?.at(-1) ?? 0).toFixed(1)}`).join(', ')} µs/call`);
  }
  const raw = median(perCall.get('raw-node') ?? []);
  const rows = targets.map((t) => {
    const values = perCall.get(t.name) ?? [];
    const m = median(values);
    return [t.name, m.toFixed(1), values.map((v) => v.toFixed(1)).join(', '), (raw / m).toFixed(3)];
  });
  return [
    '',
    `CPU per proxied call, user + system (${s.rounds} rounds of ${s.calls} calls after ${s.warmup} warm-up, ${s.connections} connections, ${new Date().toISOString()})`,
    textTable(['target', 'µs/call (median)', 'rounds', 'raw / this'], rows),
    '',
  ].join('\n');
}

async function countInstructions(child: BenchChild, dir: string, url: string, headers: Record<string, string>, s: Settings): Promise<{ main: number; all: number }> {
  log(`${child.name}: ${s.warmup} warm-up calls (instrumentation off)`);
  await drive(url, headers, s.warmup, s.connections);
  callgrindControl(['-i', 'on', String(child.pid)]);
  callgrindControl(['-z', String(child.pid)]);
  log(`${child.name}: ${s.calls} measured calls`);
  await drive(url, headers, s.calls, s.connections);
  callgrindControl(['-d', String(child.pid)]);
  callgrindControl(['-i', 'off', String(child.pid)]);
  return dumpedInstructions(dir, child.pid);
}

async function main(s: Settings): Promise<void> {
  // BENCH_CALLGRIND_DIR keeps the dumps (callgrind_annotate names native and builtin frames).
  const dir = process.env.BENCH_CALLGRIND_DIR ?? path.join(os.tmpdir(), `bff-bench-callgrind-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const started: BenchChild[] = [];
  const keep = <T extends BenchChild>(c: T): T => (started.push(c), c);
  let redis: RedisServer | undefined;
  const underCallgrind = (name: string) => s.profile || s.cpu ? { name } : ({
    execPath: 'valgrind',
    execArgv: ['--tool=callgrind', '--smc-check=all-non-file', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${dir}/callgrind.%p`, process.execPath],
    readyTimeoutMs: 300_000,
    name,
  });
  try {
    const [r, upstream, gwPort] = await Promise.all([
      startRedisServer(),
      startChild<{ url: string }>({ name: 'upstream', module: moduleOf('servers/upstream'), options: { host: HOST } }).then(keep),
      findFreePort(),
    ]);
    redis = r;
    const gwUrl = `http://${HOST}:${gwPort}`;
    const idp = keep(
      await startChild<{ issuer: string }>({
        name: 'provider',
        module: moduleOf('servers/idp'),
        options: {
          accessTokenTtl: 3600,
          clients: [benchGatewayClient(CLIENT, gwUrl)],
        },
      }),
    );
    log(s.profile || s.cpu ? 'starting the gateway and the raw proxy' : 'starting the gateway and the raw proxy under callgrind (slow)');
    const env = { NODE_ENV: 'production' };
    const [gateway, raw] = await Promise.all([
      startChild<{ url: string; cookieName: string }>({
        ...underCallgrind('gateway'),
        module: moduleOf('servers/gateway'),
        env,
        options: {
          host: HOST,
          port: gwPort,
          issuer: idp.info.issuer,
          clientId: CLIENT.id,
          clientSecret: CLIENT.secret,
          ...benchSessionKeys(),
          redisUrl: r.url,
          upstream: upstream.info.url,
          dpopRoute: s.dpopSession,
        } satisfies GatewayOptions,
      }).then(keep),
      startChild<{ url: string }>({ ...underCallgrind('raw-node'), module: moduleOf('servers/raw'), env, options: { host: HOST, upstream: upstream.info.url } }).then(keep),
    ]);
    const client = new BrowserClient();
    await signIn(client, gateway.info.url, { user: 'alice', password: 'alice-password' });
    const cookie = Object.entries(client.cookies(gateway.info.url))
      .map(([k, v]) => `${k}=${v}`)
      .join('; ');
    if (!cookie.includes(`${gateway.info.cookieName}=`)) throw new Error('the sign-in set no session cookie');
    const headers: Record<string, string> = { cookie, 'x-csrf': '1', ...(s.chunked ? { 'x-bench-chunked': '1' } : {}) };

    // The floors read a value the size of the gateway's session record (the one it just wrote).
    const floors: BenchChild<{ url: string }>[] = [];
    if (s.floors) {
      const started = await startFloors({
        names: ['hpm', 'httpxy', 'httpxy+getex', 'hpm+getex', 'raw+getex'],
        host: HOST,
        upstream: upstream.info.url,
        redisUrl: r.url,
        env,
        startAs: underCallgrind,
      });
      floors.push(...started.floors.map(keep));
      log(`floors started; their GETEX reads ${started.valueBytes} bytes (the gateway's session record)`);
    }

    if (s.cpu) {
      process.stdout.write(await cpuPerCall([gateway, raw, ...floors], headers, s));
      return;
    }
    if (s.profile) {
      for (const target of [gateway, raw, ...floors]) process.stdout.write(`${await profileCalls(target, `${target.info.url}/api/echo`, headers, s)}\n\n`);
      return;
    }
    const before = await r.commandStats();
    const gwIr = await countInstructions(gateway, dir, `${gateway.info.url}/api/echo`, headers, s);
    const after = await r.commandStats();
    const rawIr = await countInstructions(raw, dir, `${raw.info.url}/api/echo`, headers, s);
    const floorIr: [string, { main: number; all: number }][] = [];
    for (const f of floors) floorIr.push([f.name, await countInstructions(f, dir, `${f.info.url}/api/echo`, headers, s)]);
    const getex = (after.getex ?? 0) - (before.getex ?? 0);
    const commands = Object.entries(after)
      .filter(([n]) => n !== 'info' && !n.startsWith('config'))
      .reduce((sum, [n, c]) => sum + c - (before[n] ?? 0), 0);
    const perCall = (ir: { main: number; all: number }) => `${String(Math.round(ir.main / s.calls)).padStart(7)}  (all threads ${Math.round(ir.all / s.calls)})`;
    const ratio = (ir: { main: number }) => (rawIr.main / ir.main).toFixed(3);
    process.stdout.write(
      [
        '',
        `instructions per proxied call, main thread (callgrind Ir, ${s.calls} calls after ${s.warmup} warm-up, ${s.connections} connections, ${new Date().toISOString()})` +
          (s.dpopSession ? ', DPoP-bound session on the Bearer route' : '') +
          (s.chunked ? ', chunked upstream answers' : ''),
        `  gateway      ${perCall(gwIr)}  raw / this ${ratio(gwIr)}`,
        `  raw-node     ${perCall(rawIr)}`,
        ...floorIr.map(([name, ir]) => `  ${name.padEnd(12)} ${perCall(ir)}  raw / this ${ratio(ir)}`),
        `  Redis commands per gateway call (warm-up and measured): ${(commands / (s.calls + s.warmup)).toFixed(3)} (GETEX ${(getex / (s.calls + s.warmup)).toFixed(3)})`,
        '',
      ].join('\n'),
    );
  } finally {
    await Promise.allSettled(started.reverse().map((c) => c.stop(20_000)));
    await redis?.close();
    if (!process.env.BENCH_CALLGRIND_DIR) rmSync(dir, { recursive: true, force: true });
  }
}

let settings: Settings;
try {
  settings = parseArgs(process.argv.slice(2));
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(2);
}
const deadline = setTimeout(() => {
  log('did not finish within 30 minutes: giving up');
  killAllChildren();
  process.exit(1);
}, 30 * 60_000);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killAllChildren();
    process.exit(130);
  });
}
main(settings).then(
  () => {
    clearTimeout(deadline);
    process.exit(0);
  },
  (err: unknown) => {
    clearTimeout(deadline);
    log(`FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    killAllChildren();
    process.exit(1);
  },
);
