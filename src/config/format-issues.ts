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
    return `${formatPath(issue.path)}: ${message}`;
  });
}
