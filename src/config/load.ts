import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { parseDocument, type YAMLError } from 'yaml';
import type { z } from 'zod';
import { configSchema } from './schema.js';
import { derive, deepFreeze, type Config } from './derive.js';
import { interpolate, type InterpolationProblem, type TypedPlaceholder } from './interpolate.js';
import { formatPath, formatZodIssues, schemaKeys } from './format-issues.js';
import { tracesUrl, tracingEndpointFromEnv } from './otel-env.js';
import { unsafeEnvironment } from './safety.js';

export type { Config } from './derive.js';

/** Thrown for any config problem; `problems` holds one printable line each. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`);
  }
}

export interface LoadOptions {
  /** The environment that `${NAME}` and PORT are read from (main passes its own). */
  env: Readonly<Record<string, string | undefined>>;
}

/** Validates an already-parsed document (YAML/JSON object) into the frozen Config. */
export function parseConfig(document: unknown, options: LoadOptions & { baseDir?: string }): Config {
  const env = options.env;
  const unsafeEnv = unsafeEnvironment(env);
  const problems: InterpolationProblem[] = [];
  const typed: TypedPlaceholder[] = [];
  const interpolated = interpolate(document ?? {}, env, problems, [], typed);
  if (problems.length > 0) {
    throw new ConfigError([...unsafeEnv, ...problems.map((p) => `${formatPath(p.path, configKeys())}: ${p.message}`)]);
  }
  applyEnvOverrides(interpolated, env);
  const tracingProblem = applyTracingEnv(interpolated, env);
  if (tracingProblem) throw new ConfigError([...unsafeEnv, tracingProblem]);
  let result = configSchema.safeParse(interpolated);
  if (!result.success && restoreText(interpolated, typed, result.error.issues)) result = configSchema.safeParse(interpolated);
  if (!result.success) throw new ConfigError([...unsafeEnv, ...formatZodIssues(result.error.issues, configKeys())]);
  if (unsafeEnv.length > 0) throw new ConfigError(unsafeEnv);
  const cfg = result.data;
  if (cfg.static && options.baseDir && !path.isAbsolute(cfg.static.root)) {
    cfg.static.root = path.resolve(options.baseDir, cfg.static.root);
  }
  return deepFreeze(derive(cfg));
}

let knownKeys: ReadonlySet<string> | undefined;
/** The config's key names, walked once (only a config with problems needs them). */
const configKeys = (): ReadonlySet<string> => (knownKeys ??= schemaKeys(configSchema));

/** file → YAML → interpolate → PORT → validate → derive → freeze. */
export function loadConfigFile(file: string, options: LoadOptions): Config {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new ConfigError([`${file}: cannot read the config file (${code})`]);
  }
  // Only positions are reported: the parser's messages quote the source, which may hold a
  // secret. So nothing goes through its own logging either (logLevel 'error': no
  // process.emitWarning), and a warning is refused, not printed: the parser would go on past
  // it (an unknown tag is ignored, its value taken as written).
  let document: unknown;
  try {
    const doc = parseDocument(text, { logLevel: 'error' });
    const [error] = doc.errors;
    if (error) throw error;
    if (doc.warnings.length > 0) {
      throw new ConfigError(doc.warnings.map((w) => `${file}: YAML warning ${w.code}${at(w)}: refused, the parser would skip over it`));
    }
    document = doc.toJS();
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError([`${file}: not valid YAML${at(err)}`]);
  }
  const config = parseConfig(document, { ...options, baseDir: path.dirname(path.resolve(file)) });
  const exposed = config.static && staticRootProblem(config.static.root, file);
  if (exposed) throw new ConfigError([`static.root: ${exposed}`]);
  return config;
}

/**
 * Everything under static.root is served to anyone: a root that holds the config file (`.`
 * beside it) published its secrets, and `/` everything. Compared by real paths (symlinks).
 */
function staticRootProblem(root: string, configFile: string): string | undefined {
  const real = (p: string) => {
    try {
      return realpathSync(p);
    } catch {
      return path.resolve(p);
    }
  };
  const served = real(root);
  if (served === path.parse(served).root) return 'is the filesystem root: every file would be served to anyone';
  const file = real(configFile);
  if (file.startsWith(served + path.sep)) return 'holds the config file, which would be served to anyone with its secrets; serve a folder of its own (the built SPA)';
  return undefined;
}

/**
 * A placeholder typed by its text (`${X}` with X=123) where the schema wants a string (a
 * client secret, an API key) goes back to being that text. True if any did.
 */
function restoreText(doc: unknown, typed: readonly TypedPlaceholder[], issues: readonly z.core.$ZodIssue[]): boolean {
  let restored = false;
  for (const issue of issues) {
    if (issue.code !== 'invalid_type' || issue.expected !== 'string') continue;
    const placeholder = typed.find((t) => t.path.length === issue.path.length && t.path.every((k, i) => k === issue.path[i]));
    if (placeholder === undefined) continue;
    const parent = placeholder.path.slice(0, -1).reduce<unknown>((node, key) => (node as Record<string | number, unknown>)[key], doc);
    (parent as Record<string | number, unknown>)[placeholder.path[placeholder.path.length - 1] as string | number] = placeholder.text;
    restored = true;
  }
  return restored;
}

/** ` (line L, column C)` of a parser error or warning, without its message. */
function at(err: unknown): string {
  const where = (err as Partial<Pick<YAMLError, 'linePos'>>).linePos?.[0];
  return where ? ` (line ${where.line}, column ${where.col})` : '';
}

function applyEnvOverrides(doc: unknown, env: Readonly<Record<string, string | undefined>>): void {
  const port = env.PORT;
  if (port === undefined || port === '' || doc === null || typeof doc !== 'object') return;
  const record = doc as Record<string, unknown>;
  const server = (record.server ?? {}) as Record<string, unknown>;
  record.server = { ...server, port: /^\d+$/.test(port) ? Number(port) : port };
}

/**
 * observability.tracing.endpoint: the file's, a bare origin taken as the collector's base
 * (otel-env.ts tracesUrl); else from the OTel environment variables (otel-env.ts), whose
 * traces URL is used as is. A malformed section is left to the schema to report.
 */
function applyTracingEnv(doc: unknown, env: Readonly<Record<string, string | undefined>>): string | undefined {
  if (doc === null || typeof doc !== 'object') return undefined;
  const record = doc as Record<string, unknown>;
  const observability = record.observability ?? {};
  if (observability === null || typeof observability !== 'object') return undefined;
  const tracing = (observability as Record<string, unknown>).tracing ?? {};
  if (tracing === null || typeof tracing !== 'object') return undefined;
  if ('endpoint' in tracing) {
    const endpoint: unknown = tracing.endpoint;
    if (typeof endpoint === 'string' && URL.canParse(endpoint)) record.observability = { ...observability, tracing: { ...tracing, endpoint: tracesUrl(endpoint) } };
    return undefined;
  }
  const found = tracingEndpointFromEnv(env);
  if (found === undefined) return undefined;
  if ('problem' in found) return found.problem;
  record.observability = { ...observability, tracing: { ...tracing, endpoint: found.endpoint } };
  return undefined;
}
