/**
 * The suite's one secret scanner: which of the named secrets occur in a text. Names are
 * reported, never the values, so a failure message does not leak what it found.
 */

export interface FindSecretsOptions {
  /** A distinctive piece of a secret that must not appear either (reported as `a fragment of <name>`). */
  fragment?: (value: string) => string | undefined;
}

/** The names of the secrets found in `haystack`, in the order given; empty values are skipped. */
export function findSecrets(haystack: string, secrets: Record<string, string | undefined>, options: FindSecretsOptions = {}): string[] {
  const found: string[] = [];
  for (const [name, value] of Object.entries(secrets)) {
    if (!value) continue;
    if (haystack.includes(value)) {
      found.push(name);
      continue;
    }
    const piece = options.fragment?.(value);
    if (piece && haystack.includes(piece)) found.push(`a fragment of ${name}`);
  }
  return found;
}

/** The first secret found, if any. */
export function findSecret(haystack: string, secrets: Record<string, string | undefined>): string | undefined {
  return findSecrets(haystack, secrets)[0];
}
