/**
 * Process CPU time from /proc/<pid>/stat (user + system, all threads), so each run can say how
 * much CPU every process spent per request: a measure that machine drift and a saturated core
 * disturb far less than requests/s. Linux only; elsewhere it reads as unavailable.
 */
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5000 }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** CPU milliseconds used so far by `pid`, or undefined when /proc is not there. */
export function cpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start at field 3 (state).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    if (!Number.isFinite(utime) || !Number.isFinite(stime)) return undefined;
    return ((utime + stime) * 1000) / clockTicks();
  } catch {
    return undefined;
  }
}

export type CpuSnapshot = Record<string, number | undefined>;

export function snapshot(pids: Record<string, number>): CpuSnapshot {
  return Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuMs(pid)]));
}

/** Per process: CPU ms spent between the snapshots. */
export function cpuDelta(before: CpuSnapshot, after: CpuSnapshot): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, a] of Object.entries(after)) {
    const b = before[name];
    if (a !== undefined && b !== undefined) out[name] = a - b;
  }
  return out;
}
