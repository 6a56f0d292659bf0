/** Command-line flags of the bench scripts. */

/**
 * The value after `flag` in `argv`, or `def` when the flag is absent; anything but a positive
 * number (a positive integer with `integer`) stops the run with a message naming the flag.
 */
export function positiveFlag(argv: readonly string[], flag: string, def: number, kind: 'number' | 'integer'): number {
  const i = argv.indexOf(flag);
  if (i < 0) return def;
  const v = Number(argv[i + 1]);
  const ok = kind === 'integer' ? Number.isInteger(v) : Number.isFinite(v);
  if (!ok || v <= 0) throw new Error(`${flag} needs a positive ${kind}`);
  return v;
}
