/**
 * README's metrics table against the registry: every series a gateway exposes has its row, and
 * every row names a series that exists (a renamed metric left alerts and dashboards reading
 * nothing while the table still promised it).
 *
 * Mutation that fails this file (checked by hand): metrics.ts `bff_token_revocations_abandoned_total`
 * → `bff_token_revocations_given_up_total`.
 */
import { readFileSync } from 'node:fs';
import { createMetrics } from '../../../src/observability/metrics.js';

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
/** The first column of the table under "| metric | labels | what |". */
const documented = (() => {
  const table = readme.split('| metric | labels | what |')[1];
  if (table === undefined) throw new Error('README has no metrics table');
  const rows = table.split('\n').slice(2);
  const names: string[] = [];
  for (const row of rows) {
    if (!row.startsWith('|')) break;
    names.push(...[...(row.split('|')[1] ?? '').matchAll(/`([a-z_*]+)`/g)].map((m) => m[1] as string));
  }
  return names;
})();
/** Registered here, or (cluster workers) by the supervisor's aggregation. */
const SUPERVISOR_SERIES = ['bff_cluster_workers_unanswered'];

const registered = async () => (await createMetrics({ defaultMetrics: false }).registry.getMetricsAsJSON()).map((m) => m.name);

it('every registered metric has a README row', async () => {
  const names = await registered();
  expect(names.length).toBeGreaterThan(15);
  expect(names.filter((name) => !documented.includes(name))).toEqual([]);
});

it('every README row names a registered metric (or prom-client\'s defaults)', async () => {
  const names = new Set([...(await registered()), ...SUPERVISOR_SERIES]);
  const stale = documented.filter((name) => !name.endsWith('_*') && !names.has(name));
  expect(documented.length).toBeGreaterThan(15);
  expect(stale).toEqual([]);
});
