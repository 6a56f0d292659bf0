import type { z } from 'zod';

/**
 * One line per problem: "key.path: what is wrong". Built from the issue's path and message
 * only; the offending value is never printed, so neither is a secret. Nor is a key of a map
 * the config lets the user name (`extraAuthParams`): a value written in a key's place
 * (`{ audience: api, <secret> }`) was printed as part of the path (found by red team). A key
 * is shown when it is one of the schema's own, or misspells one.
 */
export function formatPath(path: readonly PropertyKey[], knownKeys: ReadonlySet<string>): string {
  if (path.length === 0) return '(root)';
  return path
    .map((p, i) => {
      if (typeof p === 'number') return `[${p}]`;
      const key = String(p);
      return `${i === 0 ? '' : '.'}${knownKeys.has(key) || nearMiss(key, knownKeys) ? key : '(a key not shown)'}`;
    })
    .join('');
}

/**
 * Every key name any object of `schema` knows, at any depth: what an unknown key is compared
 * with. Walks the schema's own definition (its shapes, inner, element and option schemas).
 */
export function schemaKeys(schema: z.core.$ZodType): ReadonlySet<string> {
  const keys = new Set<string>();
  const seen = new Set<unknown>();
  const isSchema = (v: unknown): v is z.core.$ZodType => typeof v === 'object' && v !== null && '_zod' in v;
  const visit = (node: unknown): void => {
    if (seen.has(node)) return;
    seen.add(node);
    if (isSchema(node)) {
      for (const value of Object.values(node._zod.def)) visit(value);
    } else if (Array.isArray(node)) {
      for (const value of node) visit(value);
    } else if (typeof node === 'object' && node !== null) {
      // An object's shape: its keys, and their schemas.
      for (const [key, value] of Object.entries(node)) {
        if (!isSchema(value)) continue;
        keys.add(key);
        visit(value);
      }
    }
  };
  visit(schema);
  return keys;
}

/** A misspelling of a known key (case aside, or two edits at most): safe to show, and the point of showing. */
function nearMiss(key: string, known: ReadonlySet<string>): boolean {
  if (key.length > 40) return false;
  const lower = key.toLowerCase();
  for (const name of known) {
    if (name.toLowerCase() === lower || (name.length >= 4 && withinTwoEdits(lower, name.toLowerCase()))) return true;
  }
  return false;
}

function withinTwoEdits(a: string, b: string): boolean {
  if (Math.abs(a.length - b.length) > 2) return false;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min((previous[j] as number) + 1, (row[j - 1] as number) + 1, (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return (previous[b.length] as number) <= 2;
}

/** @param knownKeys the schema's key names (schemaKeys): an unknown key is quoted only if it misspells one. */
export function formatZodIssues(issues: readonly z.core.$ZodIssue[], knownKeys: ReadonlySet<string> = new Set()): string[] {
  return issues.map((issue) => {
    let message = issue.message;
    if (issue.code === 'invalid_type' && /received undefined/.test(message)) {
      message = `is required (expected ${issue.expected})`;
    }
    // Zod quotes an unknown key, and a key may be a value written in its place
    // (`apiKey: { header: X-Api-Key, sk_live_... }`, a passphrase): only a misspelling of a
    // known key is shown.
    if (issue.code === 'unrecognized_keys') {
      const shown = issue.keys.map((k) => (nearMiss(k, knownKeys) ? `"${k}"` : '(a key not shown: it may be a value)'));
      message = `Unrecognized key${issue.keys.length > 1 ? 's' : ''}: ${shown.join(', ')}`;
    }
    return `${formatPath(issue.path, knownKeys)}: ${message}`;
  });
}
