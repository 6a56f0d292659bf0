/**
 * The lean series expose exactly what prom-client's own Counter and Histogram would, for the same
 * records: same text, and the same sums when cluster workers' metrics are aggregated.
 *
 * Mutation checks (each by hand, once):
 *  - src/observability/lean-series.ts LeanHistogram observe: `value > (bounds[i] as number)` → `>=`
 *    (a value on a bound lands one bucket up) → the first test fails.
 *  - LeanCounter inc: `state.value += 1` → `state.value = 1` → the first test fails.
 */
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { LeanCounter, LeanHistogram } from '../../../src/observability/lean-series.js';

const BUCKETS = [0.001, 0.01, 0.1, 1];
const OBSERVED: [string, number][] = [
  ['/api', 0.0005],
  ['/api', 0.001],
  ['/api', 0.01],
  ['/api', 0.5],
  ['/other', 3],
  ['/api', 0.02],
];
const COUNTED: [string, string, string][] = [
  ['/api', 'GET', '200'],
  ['/api', 'GET', '200'],
  ['/api', 'POST', '401'],
  ['/other', 'GET', '404'],
];

function leanRegistry(): Registry {
  const registry = new Registry();
  const latency = new LeanHistogram('t_seconds', 'Latency.', ['route'], BUCKETS, [registry]);
  const requests = new LeanCounter('t_total', 'Requests.', ['route', 'method', 'status'], [registry]);
  for (const [route, v] of OBSERVED) latency.labels(route).observe(v);
  for (const labels of COUNTED) requests.labels(...labels).inc();
  return registry;
}

function promClientRegistry(): Registry {
  const registry = new Registry();
  const latency = new Histogram({ name: 't_seconds', help: 'Latency.', labelNames: ['route'], buckets: BUCKETS, registers: [registry] });
  const requests = new Counter({ name: 't_total', help: 'Requests.', labelNames: ['route', 'method', 'status'], registers: [registry] });
  for (const [route, v] of OBSERVED) latency.labels(route).observe(v);
  for (const labels of COUNTED) requests.labels(...labels).inc();
  return registry;
}

describe('lean series', () => {
  it("write the same Prometheus text as prom-client's Counter and Histogram for the same records", async () => {
    const lean = await leanRegistry().metrics();
    expect(lean).toBe(await promClientRegistry().metrics());
    expect(lean).toContain('t_seconds_bucket{le="0.01",route="/api"} 3');
    expect(lean).toContain('t_total{route="/api",method="GET",status="200"} 2');
  });

  it('sum across cluster workers as prom-client aggregates its own', async () => {
    const aggregate = async (make: () => Registry) => {
      const workers = await Promise.all([make(), make()].map((r) => r.getMetricsAsJSON()));
      // Through JSON, as the workers' metrics travel to the primary over IPC.
      return AggregatorRegistry.aggregate(JSON.parse(JSON.stringify(workers))).metrics();
    };
    const lean = await aggregate(leanRegistry);
    expect(lean).toBe(await aggregate(promClientRegistry));
    expect(lean).toContain('t_seconds_count{route="/api"} 10');
  });

  it('binds a series once per label set and refuses a wrong number of label values', () => {
    const registry = new Registry();
    const requests = new LeanCounter('u_total', 'U.', ['route', 'method'], [registry]);
    expect(() => requests.labels('/api')).toThrow(TypeError);
    requests.labels('/api', 'GET').inc();
    requests.labels('/api', 'GET').inc();
    return expect(registry.metrics()).resolves.toContain('u_total{route="/api",method="GET"} 2');
  });
});
