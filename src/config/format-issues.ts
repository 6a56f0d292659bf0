import type { z } from 'zod';

/**
 * One line per problem: "key.path: what is wrong". Built from the issue's path and message
 * only; the offending value is never printed, so neither is a secret.
 */
export function formatPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(root)';
  return path
    .map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`))
    .join('');
}

export function formatZodIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.map((issue) => {
    let message = issue.message;
    if (issue.code === 'invalid_type' && /received undefined/.test(message)) {
      message = `is required (expected ${issue.expected})`;
    }
    // Zod quotes an unknown key, and a key may be a value written in its place
    // (`apiKey: { header: X-Api-Key, sk_live_... }`): only what reads as a config key is shown.
    if (issue.code === 'unrecognized_keys') {
      const shown = issue.keys.map((k) => (/^[A-Za-z][a-z]*(?:[A-Z][a-z]*)*$/.test(k) && k.length <= 40 ? `"${k}"` : '(a key not shown: it may be a value)'));
      message = `Unrecognized key${issue.keys.length > 1 ? 's' : ''}: ${shown.join(', ')}`;
    }
    return `${formatPath(issue.path)}: ${message}`;
  });
}
