/** What the bench ran on: CPUs, memory, load at start, Node, Redis, package versions. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { round } from './stats.js';

export interface Machine {
  nproc: number;
  cpuModel: string;
  memoryGiB: number;
  /** 1-minute load average when the bench started (the bench itself not yet running). */
  loadAvgAtStart: number;
  node: string;
  redis: string;
  os: string;
  date: string;
  packages: Record<string, string>;
}

/** The machine, Node, Redis and the compared packages' versions, for every report. */
export function describeMachine(repoRoot: string): Machine {
  let cpuModel = os.cpus()[0]?.model ?? 'unknown';
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (m?.[1]) cpuModel = m[1].trim();
  } catch {
    // not Linux: os.cpus() it is
  }
  let nproc = os.availableParallelism();
  try {
    nproc = Number(execFileSync('nproc', { encoding: 'utf8', timeout: 5000 }).trim()) || nproc;
  } catch {
    // keep availableParallelism
  }
  let redis = 'unknown';
  try {
    redis = /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8', timeout: 5000 }))?.[1] ?? redis;
  } catch {
    // reported as unknown
  }
  const version = (pkg: string) => {
    try {
      return (JSON.parse(readFileSync(path.join(repoRoot, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
    } catch {
      return 'unknown';
    }
  };
  return {
    nproc,
    cpuModel,
    memoryGiB: round(os.totalmem() / 2 ** 30, 1),
    loadAvgAtStart: round(os.loadavg()[0] ?? 0, 2),
    node: process.version,
    redis,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    date: new Date().toISOString(),
    packages: Object.fromEntries(
      ['autocannon', 'express', 'http-proxy-middleware', 'express-openid-connect', 'connect-redis', 'ioredis', 'oidc-provider'].map((p) => [p, version(p)]),
    ),
  };
}
