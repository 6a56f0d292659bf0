/**
 * `${NAME}` and `${NAME:-default}` replaced from the environment, in string leaves only: the
 * YAML is parsed first, so an environment value can never inject structure into the config.
 * Any other `${` is refused, never kept as text: a mistyped placeholder (`${SESSION-SECRET}`)
 * or a nested default (`${A:-${B}}`) would otherwise be taken as written, and a secret would be
 * text anyone can read in the config file (long enough to pass as one).
 */
export interface InterpolationProblem {
  path: (string | number)[];
  message: string;
}

/** A value that was exactly one placeholder and was given the type its text spells. */
export interface TypedPlaceholder {
  path: (string | number)[];
  text: string;
}

const PATTERN = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;
const WHOLE = /^\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}$/;
const UNBRACED = /^\$[A-Za-z_][A-Za-z0-9_]*$/;

export function interpolate(
  value: unknown,
  env: Readonly<Record<string, string | undefined>>,
  problems: InterpolationProblem[],
  path: (string | number)[] = [],
  typed: TypedPlaceholder[] = [],
): unknown {
  if (typeof value === 'string') {
    const whole = WHOLE.exec(value);
    // The shell's and Compose's unbraced form is not ours: taken as written, `$SESSION_SECRET`
    // was a secret anyone can read in the file.
    if (UNBRACED.test(value)) {
      // Named only when it reads as an environment variable's name: a literal secret that
      // happens to start with `$` is refused too, and is not printed.
      const name = value.slice(1);
      problems.push(
        /^[A-Z][A-Z0-9_]*$/.test(name)
          ? { path, message: `is ${value}, which is not replaced: write \${${name}}` }
          : { path, message: 'is an unbraced $NAME (not shown: it may be a secret), which is not replaced: write ${NAME}' },
      );
      return '';
    }
    if (value.replace(PATTERN, '').includes('${')) {
      problems.push({ path, message: 'has a ${...} that is not a placeholder (names are letters, digits and "_"; defaults cannot nest)' });
      return '';
    }
    const replaced = value.replace(PATTERN, (_match, name: string, fallback: string | undefined) => {
      if (fallback?.includes('${')) {
        problems.push({ path, message: `has a placeholder in the default of ${name}: defaults cannot nest` });
        return '';
      }
      const found = env[name];
      if (found !== undefined && found !== '') return found;
      if (fallback !== undefined) return fallback;
      // Named only when it reads as a variable's name: a generated secret holding `${...}`
      // printed what lay between the braces (found by red team).
      problems.push({
        path,
        message: /^[A-Z][A-Z0-9_]*$/.test(name)
          ? `environment variable ${name} is not set`
          : 'has a ${...} naming an environment variable that is not set (the name is not shown: it is not in UPPER_CASE, and may be part of a secret)',
      });
      return '';
    });
    // `port: ${PORT:-3000}` should still be a number: a value that is exactly one placeholder
    // takes the type its text spells (integer, true/false), as a YAML scalar would. Where the
    // schema wants a string (a numeric client secret) the loader puts the text back (load.ts).
    if (whole) {
      if (/^-?\d+$/.test(replaced)) {
        typed.push({ path, text: replaced });
        return Number(replaced);
      }
      if (replaced === 'true' || replaced === 'false') {
        typed.push({ path, text: replaced });
        return replaced === 'true';
      }
    }
    return replaced;
  }
  if (Array.isArray(value)) return value.map((v, i) => interpolate(v, env, problems, [...path, i], typed));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, interpolate(v, env, problems, [...path, k], typed)]),
    );
  }
  return value;
}
