/**
 * README's configuration reference (the two tables under "## Configuration": top-level keys and
 * "Each route") against the schema the gateway validates with (src/config/schema.ts): every key
 * the README lists exists, every key the schema takes is listed (a key is covered by its own
 * row, or by the row of an enclosing key such as `redis.sentinel` or `dev`), and every default
 * the README writes as a literal is the schema's.
 *
 * Mutation check: change a default in schema.ts (`refreshSkewSeconds` 30 → 60), or add a key
 * to a strictObject there without a README row: one of these fails naming it.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { z } from 'zod';
import { configSchema } from '../../../src/config/schema.js';

interface JsonSchema {
  properties?: Record<string, JsonSchema>;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  items?: JsonSchema;
  default?: unknown;
}

/** Every key path the schema takes, with its default (routes as `routes[].key`). */
function schemaKeys(): Map<string, unknown> {
  const keys = new Map<string, unknown>();
  const walk = (node: JsonSchema | undefined, at: string) => {
    if (!node) return;
    for (const alt of [...(node.anyOf ?? []), ...(node.oneOf ?? [])]) walk(alt, at);
    for (const [name, child] of Object.entries(node.properties ?? {})) {
      const key = at ? `${at}.${name}` : name;
      if (!keys.has(key) || keys.get(key) === undefined) keys.set(key, child.default);
      walk(child, key);
    }
    if (node.items) walk(node.items, `${at}[]`);
  };
  walk(z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchema, '');
  return keys;
}

/** README rows: key → the default column as written. */
function readmeRows(): Map<string, string> {
  const readme = readFileSync('README.md', 'utf8');
  const start = readme.indexOf('\n## Configuration');
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
  const routeTable = section.indexOf('Each route:');
  const rows = new Map<string, string>();
  for (const m of section.matchAll(/^\| `([A-Za-z.[\]]+)` \| ([^|]*) \|/gm)) {
    const key = (m.index as number) > routeTable ? `routes[].${m[1] as string}` : (m[1] as string);
    rows.set(key === 'routes[]' ? 'routes' : key, (m[2] as string).trim());
  }
  return rows;
}

const schema = schemaKeys();
const readme = readmeRows();

describe('README configuration reference', () => {
  it('lists only keys the schema takes', () => {
    expect(readme.size).toBeGreaterThan(60);
    expect([...readme.keys()].filter((key) => !schema.has(key))).toEqual([]);
  });

  it('lists every key the schema takes (or an enclosing one)', () => {
    const listed = [...readme.keys()];
    const covered = (key: string) => listed.some((row) => row === key || key.startsWith(`${row}.`) || key.startsWith(`${row}[]`) || row.startsWith(`${key}.`) || row.startsWith(`${key}[]`));
    expect([...schema.keys()].filter((key) => !covered(key))).toEqual([]);
  });

  it('gives the schema\'s default wherever it writes one as a literal', () => {
    const wrong: string[] = [];
    for (const [key, column] of readme) {
      const literal = /^`([^`]+)`/.exec(column)?.[1];
      if (literal === undefined) continue; // required, —, unset: no default written
      // YAML, as a config file would spell it; `bff:` is the string, not a map.
      const read: unknown = parse(literal);
      const documented = typeof read === 'object' && read !== null && !/^[[{]/.test(literal) ? literal : read;
      const actual = schema.get(key) ?? (key === 'redis.url' ? (schema.get('redis') as { url?: string } | undefined)?.url : undefined);
      if (JSON.stringify(documented) !== JSON.stringify(actual)) wrong.push(`${key}: README ${literal}, schema ${JSON.stringify(actual)}`);
    }
    expect(wrong).toEqual([]);
  });
});
