/** Redis commands the servers sent, from two `INFO commandstats` readings. */

export type CommandStats = Record<string, number>;

/** The bench's own INFO / CONFIG calls are not the servers' work. */
const isAdminCommand = (name: string) => name === 'info' || name.startsWith('config');

export function statsDelta(before: CommandStats, after: CommandStats): { total: number; byCommand: Record<string, number> } {
  const byCommand: Record<string, number> = {};
  let total = 0;
  for (const [name, calls] of Object.entries(after)) {
    if (isAdminCommand(name)) continue;
    const d = calls - (before[name] ?? 0);
    if (d > 0) {
      byCommand[name] = d;
      total += d;
    }
  }
  return { total, byCommand };
}
