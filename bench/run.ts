/**
 * `npm run bench` (SPEC §9): the gateway against a bare http-proxy-middleware proxy (baseline)
 * and an express-openid-connect + connect-redis proxy (reference), in the same run; the
 * gateway's DPoP route (`gateway-dpop`, dpop-route.ts) is a target of its own beside the Bearer
 * route, and every comparison and SPEC §9 check stays on the Bearer route.
 *
 *   redis-server (own port)  ←  gateway, express-openid-connect
 *   upstream echo server     ←  gateway, baseline, express-openid-connect
 *   dev provider (oidc-provider) for the sign-ins and the refresh storm
 *   autocannon in its own process (2 cores: never on a server's event loop)
 *
 * Phases, each with a deadline: start everything → sign in (gateway and EOC, through the real
 * provider) → warm-up per target → N alternating rounds (the order rotates each round, so
 * machine drift hits every target alike), Redis INFO commandstats deltas around each run →
 * CPU profile of each server under the same load (inspector Profiler, in the server's own
 * process; the gateway's is the one reported, the others explain the difference) →
 * refresh storm (200 concurrent calls right after expiry) → table on stdout, JSON in
 * bench/results/latest.json, Markdown in bench/results/latest.md. Every child is killed at the
 * end, also on error or Ctrl-C.
 *
 *   --quick            2 s rounds, 1 s warm-ups (a smoke run, ~40 s)
 *   --rounds N         measured rounds (minimum 3; default 3)
 *   --duration S       seconds per measured run (default 10, quick 2)
 *   --connections C    concurrency (default 32)
 *   --strict           exit 1 when a performance target is missed
 *   --experiment autopipelining
 *                      the gateway with ioredis auto-pipelining on (a bench-only variation that
 *                      measures a suggested src/ change; reported as such)
 *   --workers          also: the CLI with server.workers 1 and 2, alternating (workers.ts)
 *   --login            also: sign-ins per second through the full flow (login.ts)
 *   --login-concurrency N   sign-ins at once in --login (default 8)
 *   --skip-main        only the sections asked for (--workers, --login): no main rounds,
 *                      profiles or storm, and bench/results/latest.* stay as they are
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { BrowserClient } from '../test/support/browser-client.js';
import { signIn } from '../test/support/drive-login.js';
import { findFreePort, startRedisServer, type RedisServer } from '../test/support/redis-server.js';
import { positiveFlag } from './lib/args.js';
import { cpuDelta, machineShares, machineTicks, snapshot } from './lib/cpu.js';
import { benchGatewayClient, benchSessionKeys } from './lib/gateway-config.js';
import { describeMachine, type Machine } from './lib/machine.js';
import { statsDelta } from './lib/redis-stats.js';
import { killAllChildren, startChild, type BenchChild } from './lib/ipc.js';
import { summarizeProfile, type ProfileSummary } from './lib/profile.js';
import { markdownTable, median, round, textTable } from './lib/stats.js';
import { checkSchemes, dpopComparison, dpopLine, DPOP_ROUTE_PATH, DPOP_TARGET, type DpopComparison } from './dpop-route.js';
import type { LoadResult, LoadRun } from './load.js';
import type { GatewayOptions } from './servers/gateway.js';
import { startFloors } from './floors.js';
import { LOGIN_HEADER, loginRows, loginSection } from './login.js';
import { refreshStorm, STORM_HEADER, stormRows, type StormTrial } from './storm.js';
import { WORKERS_HEADER, workersRows, workersSection } from './workers.js';

const round2 = (v: number) => round(v, 2);

// ---------------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------------

interface Settings {
  quick: boolean;
  rounds: number;
  durationSec: number;
  warmupSec: number;
  connections: number;
  profileSec: number;
  stormCalls: number;
  stormTrials: number;
  strict: boolean;
  deadlineMs: number;
  /** Bench-only variations of the gateway, to measure a suggested src/ change before making it. */
  experiments: string[];
  /** Also record a sampling heap profile (allocations) of every target under load. */
  heapProfile: boolean;
  /** Extra sections: the multi-core run, the sign-in rate. */
  workers: boolean;
  login: boolean;
  loginConcurrency: number;
  skipMain: boolean;
  /** Also the floors (floors.ts) as targets: what HPM's engine and one GETEX cost by throughput. */
  floors: boolean;
}

const EXPERIMENTS = new Set(['autopipelining']);
/** The floors `--floors` adds as targets: HPM's engine as the gateway calls it, alone and with a GETEX, and HPM as mounted with one. */
const FLOOR_TARGETS = ['httpxy', 'httpxy+getex', 'hpm+getex'] as const;

/** latest.json / latest.md, or experiment-<names>.* so that an experiment never replaces the plain run. */
const resultName = (s: Settings) =>
  s.experiments.length || s.floors ? `experiment-${[...s.experiments, ...(s.floors ? ['floors'] : [])].join('-')}` : 'latest';

function parseArgs(argv: string[]): Settings {
  const quick = argv.includes('--quick');
  const num = (flag: string, def: number) => positiveFlag(argv, flag, def, 'number');
  const known = new Set(['--quick', '--strict', '--heap-profile', '--rounds', '--duration', '--connections', '--experiment', '--workers', '--login', '--login-concurrency', '--skip-main', '--floors']);
  const experiments: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (!known.has(a)) {
      throw new Error(
        `unknown argument ${a}\nusage: npm run bench -- [--quick] [--rounds N] [--duration S] [--connections C] [--strict] [--experiment autopipelining] [--workers] [--login] [--login-concurrency N] [--skip-main] [--floors]`,
      );
    }
    if (a === '--experiment') {
      const name = argv[i + 1] ?? '';
      if (!EXPERIMENTS.has(name)) throw new Error(`--experiment needs one of: ${[...EXPERIMENTS].join(', ')}`);
      experiments.push(name);
    }
    if (a === '--rounds' || a === '--duration' || a === '--connections' || a === '--experiment' || a === '--login-concurrency') i++;
  }
  const rounds = Math.max(3, Math.floor(num('--rounds', 3)));
  const durationSec = num('--duration', quick ? 2 : 10);
  const warmupSec = quick ? 1 : 5;
  const profileSec = quick ? 2 : 8;
  const stormTrials = quick ? 2 : 3;
  // Everything measured, plus generous slack for startup, sign-ins and the storm.
  const floors = argv.includes('--floors');
  const targetCount = 5 + experiments.length + (floors ? FLOOR_TARGETS.length : 0);
  const workers = argv.includes('--workers');
  const login = argv.includes('--login');
  const skipMain = argv.includes('--skip-main');
  if (skipMain && !workers && !login) throw new Error('--skip-main needs --workers or --login');
  const plannedSec =
    (skipMain ? 0 : targetCount * (warmupSec + rounds * durationSec + profileSec)) +
    (workers ? 2 * (warmupSec + rounds * durationSec) + 60 : 0) +
    (login ? durationSec + 60 : 0);
  return {
    quick,
    rounds,
    durationSec,
    warmupSec,
    connections: Math.floor(num('--connections', 32)),
    profileSec,
    stormCalls: 200,
    stormTrials,
    strict: argv.includes('--strict'),
    experiments,
    heapProfile: argv.includes('--heap-profile'),
    workers,
    login,
    loginConcurrency: Math.floor(num('--login-concurrency', 8)),
    skipMain,
    floors,
    deadlineMs: (plannedSec * (argv.includes('--heap-profile') ? 2 : 1) + 120) * 1000,
  };
}

const HOST = '127.0.0.1';
const here = path.dirname(fileURLToPath(import.meta.url)); // dist-bench/bench
const repoRoot = path.resolve(here, '../..');
const resultsDir = path.join(repoRoot, 'bench', 'results');
const moduleOf = (name: string) => path.join(here, `${name}.js`);

const GATEWAY_CLIENT = { id: 'bff-bench', secret: 'bff-bench-secret-0123456789abcdef' };
const EOC_CLIENT = { id: 'eoc-bench', secret: 'eoc-bench-secret-0123456789abcdef' };
/** Long enough that no token expires during the load phases; the storm moves the clock instead. */
const ACCESS_TOKEN_TTL = 900;
const STORM_CLOCK_STEP = 1000;

function log(line: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
}

/** Rejects after `ms` with a message naming the phase. */
async function withTimeout<T>(phase: string, ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`phase '${phase}' did not finish within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------------------------

interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
}

interface RunRecord extends LoadResult {
  target: string;
  round: number;
  redisCommands: number;
  redisCommandsPerRequest: number;
  redisByCommand: Record<string, number>;
  /** CPU per request sent (µs), by process: the target, upstream, redis, autocannon. */
  cpuUsPerRequest: Record<string, number>;
  /** Average CPU use during the run (% of one core), by process. */
  cpuPercent: Record<string, number>;
  /** 1-minute load average at the end of the run: other work on the machine shows up here. */
  loadAvg1: number;
  /** Whole machine during the run (all CPUs): busy / idle / stolen by the hypervisor, %. */
  machine?: { busyPercent: number; idlePercent: number; stealPercent: number };
  /** The target's memory after the run. */
  targetMemory?: { rssMB: number; heapUsedMB: number; heapTotalMB: number };
  /** The target's GC pauses during the run. */
  targetGc?: GcStats;
}

interface GcStats {
  count: number;
  totalMs: number;
  maxMs: number;
  major: number;
  /** Bytes scavenges moved into the old generation during the run. */
  promotedBytes: number;
}

/** What scavenges promoted during a run, per 1,000 requests sent. */
const promotedKBPer1k = (r: RunRecord) => (r.targetGc?.promotedBytes ?? 0) / 1024 / (Math.max(1, r.sent) / 1000);

/** Process ids to account CPU to; the target's own process is under `target`. */
type Pids = Record<string, number>;

const SETTLE_MS = 300;

async function redisPid(url: string): Promise<number> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const info = await client.info('server');
    return Number(/process_id:(\d+)/.exec(info)?.[1] ?? -1);
  } finally {
    client.disconnect();
  }
}

function cookieHeader(client: BrowserClient, url: string): string {
  return Object.entries(client.cookies(url))
    .map(([k, v]) => `${k}=${v}`)
    .join('; ');
}

async function expectOk(target: Target): Promise<void> {
  const res = await fetch(target.url, { headers: target.headers, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${target.name}: GET ${target.url} answered ${res.status} before the load: ${text.slice(0, 300)}`);
}

async function measure(
  load: BenchChild,
  redis: RedisServer,
  target: Target,
  server: BenchChild,
  pids: Pids,
  settings: Settings,
  durationSec: number,
  roundNo: number,
): Promise<RunRecord> {
  const procs: Pids = { ...pids, target: pids[target.name] ?? -1 };
  // The gateway process serves two targets (Bearer and DPoP routes): account each process once.
  const seen = new Set([procs.target]);
  for (const [name, pid] of Object.entries(procs)) {
    if (name === 'target') continue;
    if (seen.has(pid)) delete procs[name];
    else seen.add(pid);
  }
  const before = await redis.commandStats();
  await server.call('gcStats').catch(() => undefined);
  const cpuBefore = snapshot(procs);
  const machineBefore = machineTicks();
  const wallStart = performance.now();
  const args: LoadRun = { url: target.url, headers: target.headers, connections: settings.connections, durationSec };
  const result = await load.call<LoadResult>('run', args, (durationSec + 30) * 1000);
  // Requests still in flight when autocannon stopped finish now, inside this run's window.
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const cpu = cpuDelta(cpuBefore, snapshot(procs));
  const machine = machineShares(machineBefore, machineTicks());
  const wallMs = performance.now() - wallStart;
  const targetMemory = await server.call<RunRecord['targetMemory']>('memory').catch(() => undefined);
  const targetGc = await server.call<GcStats>('gcStats').catch(() => undefined);
  const after = await redis.commandStats();
  const delta = statsDelta(before, after);
  const sent = Math.max(1, result.sent);
  const record: RunRecord = {
    ...result,
    target: target.name,
    round: roundNo,
    redisCommands: delta.total,
    redisCommandsPerRequest: delta.total / sent,
    redisByCommand: delta.byCommand,
    cpuUsPerRequest: Object.fromEntries(Object.entries(cpu).map(([k, ms]) => [k, round2((ms * 1000) / sent)])),
    cpuPercent: Object.fromEntries(Object.entries(cpu).map(([k, ms]) => [k, round2((100 * ms) / wallMs)])),
    loadAvg1: round2(os.loadavg()[0] ?? 0),
    ...(machine ? { machine } : {}),
    ...(targetMemory ? { targetMemory } : {}),
    ...(targetGc ? { targetGc } : {}),
  };
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(
      `${target.name} round ${roundNo}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts out of ${result.responses} responses\n` +
        `last output of ${target.name}:\n${server.output().trim().slice(-1500)}`,
    );
  }
  return record;
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

interface TargetSummary {
  target: string;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  redisCommandsPerRequest: number;
  redisByCommandPerRequest: Record<string, number>;
  /** Median over rounds, µs of CPU per request, by process (`target` = the server under test). */
  cpuUsPerRequest: Record<string, number>;
  /** Median over rounds, % of one core, by process. */
  cpuPercent: Record<string, number>;
  /** Median over rounds: GC in the target during a run. */
  gc: { collections: number; totalMs: number; maxPauseMs: number; major: number; promotedKBPer1k: number };
  rounds: { rps: number; p50Ms: number; p99Ms: number }[];
}

function medianBy(records: RunRecord[], pick: (r: RunRecord) => Record<string, number>): Record<string, number> {
  const names = new Set(records.flatMap((r) => Object.keys(pick(r))));
  return Object.fromEntries([...names].map((n) => [n, round(median(records.map((r) => pick(r)[n] ?? 0)), 1)]));
}

function summarize(records: RunRecord[], name: string): TargetSummary {
  const mine = records.filter((r) => r.target === name);
  const sent = mine.reduce((s, r) => s + r.sent, 0);
  const byCommand: Record<string, number> = {};
  for (const r of mine) for (const [c, n] of Object.entries(r.redisByCommand)) byCommand[c] = (byCommand[c] ?? 0) + n;
  return {
    target: name,
    rps: median(mine.map((r) => r.rps)),
    p50Ms: median(mine.map((r) => r.latencyMs.p50)),
    p99Ms: median(mine.map((r) => r.latencyMs.p99)),
    meanMs: median(mine.map((r) => r.latencyMs.mean)),
    redisCommandsPerRequest: sent ? mine.reduce((s, r) => s + r.redisCommands, 0) / sent : 0,
    redisByCommandPerRequest: Object.fromEntries(Object.entries(byCommand).map(([c, n]) => [c, round(n / Math.max(1, sent), 4)])),
    cpuUsPerRequest: medianBy(mine, (r) => r.cpuUsPerRequest),
    cpuPercent: medianBy(mine, (r) => r.cpuPercent),
    gc: {
      collections: median(mine.map((r) => r.targetGc?.count ?? 0)),
      totalMs: round(median(mine.map((r) => r.targetGc?.totalMs ?? 0)), 1),
      maxPauseMs: round(median(mine.map((r) => r.targetGc?.maxMs ?? 0)), 1),
      major: median(mine.map((r) => r.targetGc?.major ?? 0)),
      promotedKBPer1k: round(median(mine.map(promotedKBPer1k)), 1),
    },
    rounds: mine.map((r) => ({ rps: round(r.rps, 1), p50Ms: round(r.latencyMs.p50, 3), p99Ms: round(r.latencyMs.p99, 3) })),
  };
}

interface Check {
  target: string;
  measured: string;
  pass: boolean;
}

function checks(gw: TargetSummary, base: TargetSummary, eoc: TargetSummary): Check[] {
  return [
    {
      target: 'gateway throughput >= 0.9 x baseline',
      measured: `${round(gw.rps / base.rps, 3)} x`,
      pass: gw.rps >= 0.9 * base.rps,
    },
    {
      target: 'gateway p99 <= baseline p99 + 2 ms',
      measured: `${round(gw.p99Ms - base.p99Ms, 2) >= 0 ? '+' : ''}${round(gw.p99Ms - base.p99Ms, 2)} ms`,
      pass: gw.p99Ms <= base.p99Ms + 2,
    },
    {
      target: 'gateway throughput >= 1.3 x express-openid-connect',
      measured: `${round(gw.rps / eoc.rps, 3)} x`,
      pass: gw.rps >= 1.3 * eoc.rps,
    },
    {
      target: 'steady-state Redis commands per proxied call <= 1',
      measured: gw.redisCommandsPerRequest.toFixed(3),
      pass: gw.redisCommandsPerRequest <= 1.0005,
    },
  ];
}

function mainTableRows(summaries: TargetSummary[], base: TargetSummary): (string | number)[][] {
  return summaries.map((s) => [
    s.target,
    Math.round(s.rps),
    s.p50Ms.toFixed(2),
    s.p99Ms.toFixed(2),
    (s.rps / base.rps).toFixed(3),
    s.redisCommandsPerRequest.toFixed(3),
    (s.cpuUsPerRequest.target ?? 0).toFixed(0),
    (s.cpuUsPerRequest.redis ?? 0).toFixed(0),
  ]);
}

const MAIN_HEADER = ['target', 'req/s (median)', 'p50 ms', 'p99 ms', 'req/s vs baseline', 'Redis cmds/request', 'server CPU µs/req', 'redis CPU µs/req'];
const CPU_HEADER = ['target', 'server %', 'upstream %', 'redis %', 'autocannon %'];
const cpuRows = (summaries: TargetSummary[]) =>
  summaries.map((s) => [s.target, ...['target', 'upstream', 'redis', 'autocannon'].map((k) => (s.cpuPercent[k] ?? 0).toFixed(0))]);
const GC_HEADER = ['target', 'collections', 'GC ms', 'longest pause ms', 'major', 'promoted KB / 1k req'];
const gcRows = (summaries: TargetSummary[]) =>
  summaries.map((s) => [s.target, s.gc.collections, s.gc.totalMs.toFixed(0), s.gc.maxPauseMs.toFixed(1), s.gc.major, s.gc.promotedKBPer1k.toFixed(0)]);
const PROFILE_HEADER = ['#', 'function', 'location', 'self ms', 'self %'];
const profileRows = (p: ProfileSummary) => p.top.map((e, i) => [i + 1, e.function, e.location || e.category, e.selfMs.toFixed(1), e.percent.toFixed(1)]);

interface ProfiledTarget {
  target: string;
  file: string;
  load: LoadResult;
  summary: ProfileSummary;
  /** Busy CPU per request sent during the profile, µs (profiler overhead included). */
  busyUsPerRequest: number;
}

/** CPU per request by owner (see ProfileSummary.byOwner), one column per profiled target. */
function categoryComparison(profiles: ProfiledTarget[]): { header: string[]; rows: (string | number)[][] } {
  const first = profiles[0]?.summary.byOwner ?? [];
  const others = profiles.slice(1).flatMap((p) => p.summary.byOwner.slice(0, 6).map((o) => o.owner));
  const owners = [...new Set([...first.slice(0, 16).map((o) => o.owner), ...others])];
  const perRequest = (p: ProfiledTarget, owner: string) => {
    const ms = p.summary.byOwner.find((o) => o.owner === owner)?.selfMs ?? 0;
    return ((ms * 1000) / Math.max(1, p.load.sent)).toFixed(1);
  };
  return {
    header: ['CPU µs per request, by owner', ...profiles.map((p) => p.target)],
    rows: [
      ...owners.map((c) => [c, ...profiles.map((p) => perRequest(p, c))]),
      ['all (busy)', ...profiles.map((p) => p.busyUsPerRequest.toFixed(1))],
    ],
  };
}

function markdownReport(r: Report): string {
  const base = r.summary.find((s) => s.target === 'baseline') as TargetSummary;
  return [
    `Run ${r.machine.date}: ${r.machine.nproc} CPUs (${r.machine.cpuModel}), Node ${r.machine.node}, Redis ${r.machine.redis}; ` +
      `${r.settings.rounds} rounds x ${r.settings.durationSec} s per target at ${r.settings.connections} connections${r.settings.quick ? ' (--quick)' : ''}` +
      `${r.settings.experiments.length ? ` [EXPERIMENT: ${r.settings.experiments.join(', ')}]` : ''}; ` +
      `load average ${r.machine.loadAvgAtStart} at start, ${median(r.runs.map((x) => x.loadAvg1)).toFixed(1)} (median) during the runs, ` +
      `CPU stolen by the hypervisor ${median(r.runs.map((x) => x.machine?.stealPercent ?? 0)).toFixed(1)}% (median).`,
    '',
    markdownTable(MAIN_HEADER, mainTableRows(r.summary, base)),
    '',
    markdownTable(['target', 'measured', 'met'], r.checks.map((c) => [c.target, c.measured, c.pass ? 'yes' : '**no**'])),
    '',
    `Against the Node ceiling (a raw \`node:http\` proxy, no framework, no auth): the gateway at ${ceilingRatio(r.summary)} of its throughput (issue 17's goal: 0.9 x).`,
    '',
    dpopLine(r.dpop),
    '',
    'CPU use during the measured runs (median, % of one core):',
    '',
    markdownTable(CPU_HEADER, cpuRows(r.summary)),
    '',
    'Garbage collection in the server during a measured run (median over rounds; promoted: what scavenges moved into the old generation):',
    '',
    markdownTable(GC_HEADER, gcRows(r.summary)),
    '',
    'Refresh storm:',
    '',
    markdownTable(STORM_HEADER, stormRows(r.storm)),
    '',
    `Gateway profile (${r.profile.busyMs.toFixed(0)} ms busy of ${r.profile.wallMs.toFixed(0)} ms, ${r.profile.samples} samples), top self time:`,
    '',
    markdownTable(PROFILE_HEADER, profileRows(r.profile)),
    '',
    'CPU per request by owner: each sample is charged to the nearest frame that is not Node core or native code (profiler overhead included):',
    '',
    markdownTable(categoryComparison(r.profiles).header, categoryComparison(r.profiles).rows),
    '',
  ].join('\n');
}

interface Report {
  machine: Machine;
  settings: Settings;
  summary: TargetSummary[];
  checks: Check[];
  /** The DPoP route against the Bearer route, same gateway process (undefined: not measured). */
  dpop: DpopComparison | undefined;
  runs: RunRecord[];
  storm: StormTrial[];
  /** The gateway's. */
  profile: ProfileSummary;
  profiles: ProfiledTarget[];
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

async function main(settings: Settings): Promise<number> {
  const machine = describeMachine(repoRoot);
  log(`${machine.nproc} CPUs (${machine.cpuModel}), Node ${machine.node}, Redis ${machine.redis}`);
  mkdirSync(resultsDir, { recursive: true });
  const started: BenchChild[] = [];
  let redis: RedisServer | undefined;
  const keep = <T extends BenchChild>(c: T): T => {
    started.push(c);
    return c;
  };
  try {
    // --- start everything -----------------------------------------------------------------------
    const startup = withTimeout('startup', 60_000, (async () => {
      const [r, upstream, gwPort, eocPort] = await Promise.all([
        startRedisServer(),
        startChild<{ url: string }>({ name: 'upstream', module: moduleOf('servers/upstream'), options: { host: HOST } }).then(keep),
        findFreePort(),
        findFreePort(),
      ]);
      redis = r;
      const gwUrl = `http://${HOST}:${gwPort}`;
      const eocUrl = `http://${HOST}:${eocPort}`;
      const idp = keep(
        await startChild<{ issuer: string }>({
          name: 'provider',
          module: moduleOf('servers/idp'),
          options: {
            accessTokenTtl: ACCESS_TOKEN_TTL,
            clients: [
              benchGatewayClient(GATEWAY_CLIENT, gwUrl),
              {
                client_id: EOC_CLIENT.id,
                client_secret: EOC_CLIENT.secret,
                redirect_uris: [`${eocUrl}/callback`],
                post_logout_redirect_uris: [`${eocUrl}/`],
                grant_types: ['authorization_code', 'refresh_token'],
                response_types: ['code'],
              },
            ],
          },
        }),
      );
      const env = { NODE_ENV: 'production' };
      // Experimental variants are more gateway processes on the same Redis with the same
      // secrets (SPEC §1: instances share sessions), so the one sign-in serves them all.
      const gatewayOptions = (port: number, autoPipelining: boolean): GatewayOptions => ({
        host: HOST,
        port,
        issuer: idp.info.issuer,
        clientId: GATEWAY_CLIENT.id,
        clientSecret: GATEWAY_CLIENT.secret,
        ...benchSessionKeys(),
        redisUrl: r.url,
        upstream: upstream.info.url,
        autoPipelining,
        dpopRoute: true,
        // --login signs in hundreds of times from one address: past the default 60 a minute.
        ...(settings.login ? { loginPerMinute: 1_000_000 } : {}),
      });
      const mainGateway = gatewayOptions(gwPort, false);
      const variants = Promise.all(
        settings.experiments.map(async (experiment) =>
          keep(
            await startChild<{ url: string; cookieName: string }>({
              name: `gateway+${experiment}`,
              module: moduleOf('servers/gateway'),
              env,
              options: {
                ...mainGateway,
                port: await findFreePort(),
                autoPipelining: experiment === 'autopipelining',
              } satisfies GatewayOptions,
            }),
          ),
        ),
      );
      const [gateway, baseline, eoc, raw, load, experimental] = await Promise.all([
        startChild<{ url: string; cookieName: string }>({
          name: 'gateway',
          module: moduleOf('servers/gateway'),
          env,
          // Node/V8 flags for the gateway only, for experiments (e.g. --trace-gc); never in a reported run.
          execArgv: process.env.BENCH_GATEWAY_NODE_ARGS?.split(' ').filter(Boolean) ?? [],
          options: mainGateway,
        }).then(keep),
        startChild<{ url: string }>({ name: 'baseline', module: moduleOf('servers/baseline'), env, options: { host: HOST, upstream: upstream.info.url } }).then(keep),
        startChild<{ url: string }>({
          name: 'express-openid-connect',
          module: moduleOf('servers/eoc'),
          env,
          options: {
            host: HOST,
            port: eocPort,
            issuer: idp.info.issuer,
            clientId: EOC_CLIENT.id,
            clientSecret: EOC_CLIENT.secret,
            secret: randomBytes(32).toString('hex'),
            redisUrl: r.url,
            upstream: upstream.info.url,
          },
        }).then(keep),
        startChild<{ url: string }>({ name: 'raw-node', module: moduleOf('servers/raw'), env, options: { host: HOST, upstream: upstream.info.url } }).then(keep),
        startChild<Record<string, never>>({ name: 'autocannon', module: moduleOf('load'), options: {} }).then(keep),
        variants,
      ]);
      return { redis: r, upstream, idp, gateway, baseline, eoc, raw, load, experimental, mainGateway };
    })());
    const { idp, gateway, baseline, eoc, raw, load, upstream, experimental, mainGateway } = await startup;
    const redisServer = redis as unknown as RedisServer;
    const pids: Pids = {
      gateway: gateway.pid,
      [DPOP_TARGET]: gateway.pid,
      baseline: baseline.pid,
      'express-openid-connect': eoc.pid,
      'raw-node': raw.pid,
      ...Object.fromEntries(experimental.map((c) => [c.name, c.pid])),
      upstream: upstream.pid,
      redis: await redisPid(redisServer.url),
      autocannon: load.pid,
    };
    log(`started: gateway ${gateway.info.url}, baseline ${baseline.info.url}, express-openid-connect ${eoc.info.url}, provider ${idp.info.issuer}, redis ${redisServer.url}`);

    // --- sign in ---------------------------------------------------------------------------------
    const { gwCookie, eocCookie } = await withTimeout('sign-in', 30_000, (async () => {
      const gwClient = new BrowserClient();
      await signIn(gwClient, gateway.info.url, { user: 'alice', password: 'alice-password' });
      const eocClient = new BrowserClient();
      await signIn(eocClient, eoc.info.url, { user: 'alice', password: 'alice-password', loginPath: '/login' });
      return { gwCookie: cookieHeader(gwClient, gateway.info.url), eocCookie: cookieHeader(eocClient, eoc.info.url) };
    })());
    if (!gwCookie.includes(`${gateway.info.cookieName}=`)) throw new Error('the gateway sign-in set no session cookie');
    if (!eocCookie.includes('appSession=')) throw new Error('the express-openid-connect sign-in set no appSession cookie');

    // The floors read a value the size of the session record the gateway's sign-in just wrote.
    const floors = settings.floors
      ? (await withTimeout('floors', 60_000, startFloors({ names: FLOOR_TARGETS, host: HOST, upstream: upstream.info.url, redisUrl: redisServer.url, env: { NODE_ENV: 'production' } }))).floors.map(keep)
      : [];
    for (const f of floors) pids[f.name] = f.pid;

    // Same request bytes everywhere: the baseline gets the gateway's cookie and CSRF header too.
    const targets: Target[] = [
      { name: 'gateway', url: `${gateway.info.url}/api/echo`, headers: { cookie: gwCookie, 'x-csrf': '1' } },
      { name: 'baseline', url: `${baseline.info.url}/api/echo`, headers: { cookie: gwCookie, 'x-csrf': '1' } },
      { name: 'express-openid-connect', url: `${eoc.info.url}/api/echo`, headers: { cookie: eocCookie, 'x-csrf': '1' } },
      { name: 'raw-node', url: `${raw.info.url}/api/echo`, headers: { cookie: gwCookie, 'x-csrf': '1' } },
      // The same gateway process and session, the DPoP route (issue 15).
      { name: DPOP_TARGET, url: `${gateway.info.url}${DPOP_ROUTE_PATH}/echo`, headers: { cookie: gwCookie, 'x-csrf': '1' } },
      ...experimental.map((c) => ({ name: c.name, url: `${c.info.url}/api/echo`, headers: { cookie: gwCookie, 'x-csrf': '1' } })),
      ...floors.map((c) => ({ name: c.name, url: `${c.info.url}/api/echo`, headers: { cookie: gwCookie, 'x-csrf': '1' } })),
    ];
    await withTimeout('sanity check', 30_000, Promise.all(targets.map(expectOk)));
    await withTimeout('DPoP scheme check', 30_000, checkSchemes(targets[0] as Target, targets.find((t) => t.name === DPOP_TARGET) as Target));
    const servers: Record<string, BenchChild> = {
      gateway,
      [DPOP_TARGET]: gateway,
      baseline,
      'express-openid-connect': eoc,
      'raw-node': raw,
      ...Object.fromEntries(experimental.map((c) => [c.name, c])),
      ...Object.fromEntries(floors.map((c) => [c.name, c])),
    };
    log('signed in on the gateway and on express-openid-connect; every target answers 200; the upstream gets Bearer on /api, DPoP and a proof on /dpop');

    // --- extra sections (--workers, --login) --------------------------------------------------------
    const sections = async (): Promise<void> => {
      const out: string[] = [];
      const extra: Record<string, unknown> = { machine, settings };
      if (settings.workers) {
        const rows = await withTimeout('workers', (2 * (settings.warmupSec + settings.rounds * settings.durationSec) + 180) * 1000, workersSection({
          cli: path.join(here, '..', 'src', 'cli.js'),
          load,
          host: HOST,
          issuer: idp.info.issuer,
          clientId: GATEWAY_CLIENT.id,
          clientSecret: GATEWAY_CLIENT.secret,
          sessionSecret: mainGateway.sessionSecret,
          encryptionKey: mainGateway.encryptionKey,
          redisUrl: redisServer.url,
          upstream: upstream.info.url,
          headers: targets[0]?.headers ?? {},
          pids: { upstream: pids.upstream ?? -1, redis: pids.redis ?? -1, autocannon: pids.autocannon ?? -1 },
          counts: [1, 2],
          rounds: settings.rounds,
          durationSec: settings.durationSec,
          warmupSec: settings.warmupSec,
          connections: settings.connections,
          log,
        }));
        extra.workers = rows;
        out.push(
          `Multi-core: the CLI with server.workers 1 and 2 (${settings.rounds} alternating rounds x ${settings.durationSec} s, ${settings.connections} connections; ` +
            `${machine.nproc} cores shared with the loader, the upstream and Redis, nothing pinned; gateway CPU = the primary and all its workers):`,
          textTable(WORKERS_HEADER, workersRows(rows)),
          '',
        );
      }
      if (settings.login) {
        const result = await withTimeout('login', (settings.durationSec + 120) * 1000, loginSection({
          gatewayUrl: gateway.info.url,
          cookieName: gateway.info.cookieName,
          redis: redisServer,
          pids: { gateway: gateway.pid, provider: idp.pid, redis: pids.redis ?? -1 },
          durationSec: settings.durationSec,
          concurrency: settings.loginConcurrency,
          log,
        }));
        extra.login = result;
        out.push(
          `Sign-ins (the full flow, a fresh browser each: /auth/login, the provider's login form and consent, /auth/callback; ${settings.loginConcurrency} at once for ${settings.durationSec} s):`,
          textTable(LOGIN_HEADER, loginRows(result)),
          `Redis commands per sign-in: ${Object.entries(result.redisByCommandPerSignIn).map(([c, n]) => `${c} ${n}`).join(', ')}`,
          '',
        );
      }
      writeFileSync(path.join(resultsDir, 'sections.json'), `${JSON.stringify(extra, null, 2)}\n`);
      process.stdout.write(`\n${out.join('\n')}`);
    };
    if (settings.skipMain) {
      await sections();
      return 0;
    }

    // --- warm-up and alternating rounds -----------------------------------------------------------
    for (const t of targets) {
      log(`warm-up ${t.name} (${settings.warmupSec} s)`);
      await measure(load, redisServer, t, servers[t.name] as BenchChild, pids, settings, settings.warmupSec, 0);
    }
    const runs: RunRecord[] = [];
    for (let roundNo = 1; roundNo <= settings.rounds; roundNo++) {
      const order = targets.map((_, i) => targets[(i + roundNo - 1) % targets.length] as Target);
      for (const t of order) {
        const rec = await measure(load, redisServer, t, servers[t.name] as BenchChild, pids, settings, settings.durationSec, roundNo);
        runs.push(rec);
        log(
          `round ${roundNo}/${settings.rounds} ${t.name.padEnd(22)} ${rec.rps.toFixed(0).padStart(6)} req/s  p50 ${rec.latencyMs.p50.toFixed(2)} ms  p99 ${rec.latencyMs.p99.toFixed(2)} ms  redis ${rec.redisCommandsPerRequest.toFixed(3)}/req  ` +
            `steal ${rec.machine?.stealPercent ?? '?'}%  heap ${rec.targetMemory?.heapUsedMB ?? '?'} MB  gc ${rec.targetGc ? `${rec.targetGc.count}x ${rec.targetGc.totalMs.toFixed(0)} ms (max ${rec.targetGc.maxMs.toFixed(1)}, ${rec.targetGc.major} major, promoted ${promotedKBPer1k(rec).toFixed(0)} KB/1k req)` : '?'}  cpu % ${Object.entries(rec.cpuPercent).filter(([, v]) => v >= 1).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(', ')}`,
        );
      }
    }

    // --- CPU profiles under the same load ------------------------------------------------------------
    const profiles: ProfiledTarget[] = [];
    for (const t of targets) {
      const server = servers[t.name] as BenchChild;
      const file = path.join(resultsDir, `${resultName(settings) === 'latest' ? '' : `${resultName(settings)}-`}${t.name}.cpuprofile`);
      log(`profiling ${t.name} under load (${settings.profileSec} s)`);
      await server.call('profileStart', { samplingIntervalUs: 250 });
      const loadResult = await load.call<LoadResult>(
        'run',
        { url: t.url, headers: t.headers, connections: settings.connections, durationSec: settings.profileSec } satisfies LoadRun,
        (settings.profileSec + 30) * 1000,
      );
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      await server.call('profileStop', { file }, 60_000);
      const summary = summarizeProfile(file, repoRoot, 10);
      profiles.push({ target: t.name, file: path.relative(repoRoot, file), load: loadResult, summary, busyUsPerRequest: (summary.busyMs * 1000) / Math.max(1, loadResult.sent) });
    }
    if (settings.heapProfile) {
      for (const t of targets) {
        const server = servers[t.name] as BenchChild;
        const file = path.join(resultsDir, `${t.name}.heapprofile`);
        log(`sampling ${t.name}'s allocations under load (${settings.profileSec} s)`);
        // BENCH_HEAP_LIVE=1: only objects still alive when sampling stops, which is mid-load.
        const live = process.env.BENCH_HEAP_LIVE === '1';
        // BENCH_HEAP_PROMOTED=1: only what survived the young generation.
        await server.call('heapSampleStart', { intervalBytes: 16 * 1024, live, promoted: process.env.BENCH_HEAP_PROMOTED === '1' });
        const loaded = load.call<LoadResult>(
          'run',
          { url: t.url, headers: t.headers, connections: settings.connections, durationSec: settings.profileSec } satisfies LoadRun,
          (settings.profileSec + 30) * 1000,
        );
        if (live) await new Promise((r) => setTimeout(r, (settings.profileSec * 1000) / 2));
        else await loaded;
        await server.call('heapSampleStop', { file }, 60_000);
        await loaded;
      }
    }
    const profile = (profiles[0] as ProfiledTarget).summary;
    const gwTarget = targets[0] as Target;

    // --- refresh storm -----------------------------------------------------------------------------
    log(`refresh storm: ${settings.stormCalls} concurrent calls right after expiry, ${settings.stormTrials} trials`);
    const storm = await withTimeout('refresh storm', 120_000, refreshStorm(gateway, idp, redisServer, gwTarget, { ...settings, clockStepSec: STORM_CLOCK_STEP }));

    // --- report ------------------------------------------------------------------------------------
    const summary = targets.map((t) => summarize(runs, t.name));
    const named = (name: string) => summary.find((s) => s.target === name) as TargetSummary;
    const [gw, base, ref] = [named('gateway'), named('baseline'), named('express-openid-connect')];
    const dpop = dpopComparison(summary, runs);
    const report: Report = { machine, settings, summary, checks: checks(gw, base, ref), dpop, runs, storm, profile, profiles };
    const jsonFile = path.join(resultsDir, `${resultName(settings)}.json`);
    writeFileSync(jsonFile, `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(path.join(resultsDir, `${resultName(settings)}.md`), markdownReport(report));

    const out = [
      '',
      `bff-gateway bench — ${machine.date} — ${machine.nproc} CPUs (${machine.cpuModel}), Node ${machine.node}, Redis ${machine.redis}`,
      `${settings.rounds} alternating rounds x ${settings.durationSec} s per target, ${settings.connections} connections, GET /api/echo; ` +
        `load average ${machine.loadAvgAtStart} at start, ${median(runs.map((r) => r.loadAvg1)).toFixed(1)} (median) during the runs, ` +
        `CPU stolen by the hypervisor ${median(runs.map((r) => r.machine?.stealPercent ?? 0)).toFixed(1)}% (median)` +
        (settings.quick ? ' (--quick: indicative only)' : '') +
        (settings.experiments.length ? ` [EXPERIMENT: ${settings.experiments.join(', ')}]` : ''),
      '',
      textTable(MAIN_HEADER, mainTableRows(summary, base)),
      '',
      textTable(['target', 'measured', 'met'], report.checks.map((c) => [c.target, c.measured, c.pass ? 'yes' : 'NO'])),
      '',
      `Against the Node ceiling (a raw node:http proxy, no framework, no auth): the gateway at ${ceilingRatio(summary)} of its throughput (issue 17's goal: 0.9 x).`,
      '',
      dpopLine(dpop),
      '',
      'CPU use during the measured runs (median, % of one core):',
      textTable(CPU_HEADER, cpuRows(summary)),
      '',
      'Garbage collection in the server during a measured run (median over rounds; promoted: what scavenges moved into the old generation):',
      textTable(GC_HEADER, gcRows(summary)),
      '',
      `Refresh storm (${settings.stormCalls} concurrent calls of one session right after its access token expired):`,
      textTable(STORM_HEADER, stormRows(storm)),
      '',
      `Gateway CPU profile (${profile.busyMs.toFixed(0)} ms busy of ${profile.wallMs.toFixed(0)} ms), top self time:`,
      textTable(PROFILE_HEADER, profileRows(profile)),
      '',
      'CPU per request by owner (nearest non-Node-core frame; every server profiled alike, profiler overhead included):',
      textTable(categoryComparison(profiles).header, categoryComparison(profiles).rows),
      '',
      `JSON: ${path.relative(process.cwd(), jsonFile)}   profiles: ${profiles.map((p) => p.file).join(', ')}`,
      '',
    ];
    process.stdout.write(out.join('\n'));
    if (settings.workers || settings.login) await sections();

    const stormOk = storm.every((t) => t.ok === t.calls && t.refreshGrants === 1 && t.distinctTokens === 1 && t.tokenChanged);
    if (!stormOk) {
      log('refresh storm FAILED: expected every call to succeed with one new token and exactly one refresh grant per trial');
      return 1;
    }
    if (settings.strict && report.checks.some((c) => !c.pass)) return 1;
    return 0;
  } finally {
    await Promise.allSettled(started.reverse().map((c) => c.stop(5_000)));
    await redis?.close();
  }
}

let settings: Settings;
try {
  settings = parseArgs(process.argv.slice(2));
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(2);
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping`);
    killAllChildren();
    process.exit(130);
  });
}
const deadline = setTimeout(() => {
  log(`the whole bench did not finish within ${settings.deadlineMs / 1000} s: giving up`);
  killAllChildren();
  process.exit(1);
}, settings.deadlineMs);
main(settings).then(
  (code) => {
    clearTimeout(deadline);
    process.exit(code);
  },
  (err: unknown) => {
    clearTimeout(deadline);
    log(`FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    killAllChildren();
    process.exitCode = 1;
  },
);

/** Gateway req/s over the raw node:http proxy's, as text ('n/a' without that target). */
function ceilingRatio(summary: TargetSummary[]): string {
  const gw = summary.find((s) => s.target === 'gateway');
  const raw = summary.find((s) => s.target === 'raw-node');
  return gw && raw ? `${round(gw.rps / raw.rps, 3)} x` : 'n/a';
}
