/** Small numeric helpers for the bench (no dependencies). */

/** Nearest-rank percentile of an ascending array; 0 for an empty one. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** A plain-text table with right-aligned numeric columns. */
export function textTable(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join('  ');
  return [line(cells[0] as string[]), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

/** A Markdown table. */
export function markdownTable(header: string[], rows: (string | number)[][]): string {
  const line = (r: (string | number)[]) => `| ${r.map(String).join(' | ')} |`;
  return [line(header), `|${header.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`, ...rows.map(line)].join('\n');
}
