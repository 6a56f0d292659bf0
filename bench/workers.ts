/**
 * `npm run bench -- --workers`: the gateway as `server.workers: 1` and `server.workers: 2`,
 * started as the CLI starts it (dist-bench/src/cli.js --config FILE: the supervising primary
 * and its node:cluster workers), on the run's Redis, upstream and provider, with the same
 * session secrets as the main gateway so that its signed-in cookie works on both.
 *
 * Alternating rounds at the run's concurrency; per round: req/s, p50/p99, and CPU per call of
 * the whole gateway (primary and every worker, from /proc) next to the upstream's, Redis's and
 * the load generator's. Nothing is pinned: on a 2-core machine the loader, the upstream and
 * Redis compete with the workers for the same two cores, which is what the figures show.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { stringify as toYaml } from 'yaml';
import { findFreePort } from '../test/support/redis-server.js';
import { cpuMs, machineShares, machineTicks } from './lib/cpu.js';
import { benchGatewayConfig, type BenchGatewayInput } from './lib/gateway-config.js';
import type { BenchChild } from './lib/ipc.js';
import { median, round } from './lib/stats.js';
import type { LoadResult, LoadRun } from './load.js';

export interface WorkersSectionInput extends BenchGatewayInput {
  /** dist-bench/src/cli.js */
  cli: string;
  load: BenchChild;
  /** Cookie and CSRF headers of the main gateway's signed-in session. */
  headers: Record<string, string>;
  /** Other processes to account CPU to: upstream, redis, autocannon. */
  pids: Record<string, number>;
  counts: number[];
  rounds: number;
  durationSec: number;
  warmupSec: number;
  connections: number;
  log: (line: string) => void;
}

export interface WorkersRow {
  workers: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** The whole gateway (primary + workers), µs of CPU per call; median over rounds. */
  gatewayCpuUsPerCall: number;
  /** Cores the gateway kept busy (100 = one core). */
  gatewayCpuPercent: number;
  otherCpuPercent: Record<string, number>;
  machineBusyPercent: number;
  rounds: number[];
}

/** The pid and its descendants (the cluster's workers), from /proc. */
function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length && out.length < 64; i++) {
    try {
      const children = readFileSync(`/proc/${out[i]}/task/${out[i]}/children`, 'utf8').trim();
      if (children) out.push(...children.split(/\s+/).map(Number));
    } catch {
      // gone, or not Linux
    }
  }
  return out;
}

const treeCpuMs = (pid: number) => processTree(pid).reduce((sum, p) => sum + (cpuMs(p) ?? 0), 0);

interface Cluster {
  workers: number;
  url: string;
  child: ChildProcess;
  output: () => string;
}

async function startCluster(input: WorkersSectionInput, dir: string, workers: number): Promise<Cluster> {
  const port = await findFreePort();
  const url = `http://${input.host}:${port}`;
  const file = path.join(dir, `workers-${workers}.yaml`);
  const config = benchGatewayConfig(input, { port, publicUrl: url, workers });
  // The file holds secrets: readable by this user only, deleted at the end.
  writeFileSync(file, toYaml(config), { mode: 0o600 });
  chmodSync(file, 0o600);
  const child = spawn(process.execPath, [input.cli, '--config', file], {
    env: { ...process.env, NODE_ENV: 'production', PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-3000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server.workers ${workers}: the CLI exited ${child.exitCode}\n${tail}`);
    const ok = await fetch(`${url}/api/echo`, { headers: input.headers, signal: AbortSignal.timeout(2000) })
      .then((r) => r.status === 200)
      .catch(() => false);
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`server.workers ${workers}: no 200 from /api/echo within 60 s\n${tail}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { workers, url, child, output: () => tail };
}

async function stopCluster(c: Cluster): Promise<void> {
  if (c.child.exitCode !== null || c.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => c.child.once('exit', () => resolve()));
  c.child.kill('SIGTERM');
  const timer = setTimeout(() => c.child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

/** One round of one cluster. */
type Sample = Omit<WorkersRow, 'workers' | 'rounds'>;

async function sample(input: WorkersSectionInput, c: Cluster, durationSec: number): Promise<Sample> {
  const pid = c.child.pid as number;
  const others = () => Object.fromEntries(Object.entries(input.pids).map(([k, p]) => [k, cpuMs(p) ?? 0]));
  const gwBefore = treeCpuMs(pid);
  const othersBefore = others();
  const machineBefore = machineTicks();
  const t0 = performance.now();
  const run: LoadRun = { url: `${c.url}/api/echo`, headers: input.headers, connections: input.connections, durationSec };
  const result = await input.load.call<LoadResult>('run', run, (durationSec + 30) * 1000);
  await new Promise((r) => setTimeout(r, 300));
  const wallMs = performance.now() - t0;
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(`server.workers ${c.workers}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts\n${c.output()}`);
  }
  const gwMs = treeCpuMs(pid) - gwBefore;
  const othersAfter = others();
  return {
    rps: result.rps,
    p50Ms: result.latencyMs.p50,
    p99Ms: result.latencyMs.p99,
    gatewayCpuUsPerCall: (gwMs * 1000) / Math.max(1, result.sent),
    gatewayCpuPercent: (100 * gwMs) / wallMs,
    otherCpuPercent: Object.fromEntries(Object.keys(othersAfter).map((k) => [k, round((100 * ((othersAfter[k] ?? 0) - (othersBefore[k] ?? 0))) / wallMs, 0)])),
    machineBusyPercent: machineShares(machineBefore, machineTicks())?.busyPercent ?? 0,
  };
}

export async function workersSection(input: WorkersSectionInput): Promise<WorkersRow[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bff-bench-workers-'));
  const clusters: Cluster[] = [];
  try {
    for (const n of input.counts) {
      input.log(`workers: starting the CLI with server.workers ${n}`);
      clusters.push(await startCluster(input, dir, n));
    }
    for (const c of clusters) {
      input.log(`workers: warm-up server.workers ${c.workers} (${input.warmupSec} s)`);
      await sample(input, c, input.warmupSec);
    }
    const samples = new Map<number, Sample[]>(clusters.map((c) => [c.workers, []]));
    for (let r = 1; r <= input.rounds; r++) {
      const order = r % 2 === 1 ? clusters : [...clusters].reverse();
      for (const c of order) {
        const s = await sample(input, c, input.durationSec);
        samples.get(c.workers)?.push(s);
        input.log(
          `workers round ${r}/${input.rounds} server.workers ${c.workers}: ${s.rps.toFixed(0)} req/s, p99 ${s.p99Ms.toFixed(2)} ms, gateway ${s.gatewayCpuUsPerCall.toFixed(0)} µs/call using ${s.gatewayCpuPercent.toFixed(0)}% of a core, machine busy ${s.machineBusyPercent}%`,
        );
      }
    }
    return clusters.map((c) => {
      const mine = samples.get(c.workers) ?? [];
      const med = (pick: (s: Sample) => number) => median(mine.map(pick));
      const names = Object.keys(mine[0]?.otherCpuPercent ?? {});
      return {
        workers: c.workers,
        rps: round(med((s) => s.rps), 0),
        p50Ms: round(med((s) => s.p50Ms), 2),
        p99Ms: round(med((s) => s.p99Ms), 2),
        gatewayCpuUsPerCall: round(med((s) => s.gatewayCpuUsPerCall), 1),
        gatewayCpuPercent: round(med((s) => s.gatewayCpuPercent), 0),
        otherCpuPercent: Object.fromEntries(names.map((n) => [n, median(mine.map((s) => s.otherCpuPercent[n] ?? 0))])),
        machineBusyPercent: round(med((s) => s.machineBusyPercent), 0),
        rounds: mine.map((s) => round(s.rps, 0)),
      };
    });
  } finally {
    await Promise.allSettled(clusters.map(stopCluster));
    rmSync(dir, { recursive: true, force: true });
  }
}

export const WORKERS_HEADER = ['server.workers', 'req/s (median)', 'p50 ms', 'p99 ms', 'gateway CPU µs/call', 'gateway CPU %', 'upstream %', 'redis %', 'autocannon %', 'machine busy %'];

export const workersRows = (rows: WorkersRow[]) =>
  rows.map((r) => [
    r.workers,
    r.rps,
    r.p50Ms.toFixed(2),
    r.p99Ms.toFixed(2),
    r.gatewayCpuUsPerCall.toFixed(0),
    r.gatewayCpuPercent.toFixed(0),
    ...['upstream', 'redis', 'autocannon'].map((k) => String(r.otherCpuPercent[k] ?? 0)),
    r.machineBusyPercent.toFixed(0),
  ]);
