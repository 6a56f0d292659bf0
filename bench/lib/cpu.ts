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

/** Whole-machine jiffies from /proc/stat: busy, idle and steal (time the hypervisor took). */
export function machineTicks(): { busy: number; idle: number; steal: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const [, user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
    if (user === undefined || steal === undefined) return undefined;
    return { busy: user + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0), idle: (idle ?? 0) + (iowait ?? 0), steal };
  } catch {
    return undefined;
  }
}

/** Shares (%) of the machine's time between two machineTicks() readings. */
export function machineShares(
  a: ReturnType<typeof machineTicks>,
  b: ReturnType<typeof machineTicks>,
): { busyPercent: number; idlePercent: number; stealPercent: number } | undefined {
  if (!a || !b) return undefined;
  const busy = b.busy - a.busy;
  const idle = b.idle - a.idle;
  const steal = b.steal - a.steal;
  const total = busy + idle + steal;
  if (total <= 0) return undefined;
  const pct = (v: number) => Math.round((1000 * v) / total) / 10;
  return { busyPercent: pct(busy), idlePercent: pct(idle), stealPercent: pct(steal) };
}
