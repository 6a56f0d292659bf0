/**
 * A counter and a histogram for what every proxied call records. prom-client's bound children
 * (`metric.labels(...)`) still validate and hash their label set on every `inc` and `observe`,
 * and allocate for it: about 3% of a proxied call's instructions (docs/benchmarks.md). Here a
 * series is bound once per label set, and recording is an addition (a counter) or a bucket
 * search and three additions (a histogram): no per-call allocation.
 *
 * Both are registered in the prom-client registry like its own metrics: the registry reads
 * get() at scrape time (the text format, and the JSON that cluster aggregation sums), so the
 * exposition is prom-client's, the same names, labels and buckets as before.
 */
import type { Metric, Registry } from 'prom-client';

type Labels<L extends string> = Record<L, string>;

/** What prom-client's registry reads from a metric at scrape time (its own classes' get()). */
export interface Exposed {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  values: { labels: Record<string, string | number>; value: number; metricName?: string }[];
}

/** Bounded label values are the caller's promise (configured routes, methods, statuses, operations). */
abstract class LeanSeries<L extends string, S> {
  readonly aggregator = 'sum' as const;
  protected readonly series = new Map<string, { labels: Labels<L>; state: S }>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly L[],
    registers: readonly Registry[],
  ) {
    // The registry takes any object with get() and reset(); its type names prom-client's classes only.
    for (const registry of registers) registry.registerMetric(this as unknown as Metric);
  }

  /** The series of one label set (values in labelNames order), created on first use. */
  protected bind(values: readonly string[], create: () => S): S {
    if (values.length !== this.labelNames.length) throw new TypeError(`${this.name} takes ${this.labelNames.length} label values`);
    const key = values.join('\u0000');
    let entry = this.series.get(key);
    if (entry === undefined) {
      const labels = Object.fromEntries(this.labelNames.map((name, i) => [name, values[i]])) as Labels<L>;
      entry = { labels, state: create() };
      this.series.set(key, entry);
    }
    return entry.state;
  }

  reset(): void {
    this.series.clear();
  }
}

export interface CounterSeries {
  inc(): void;
}

export class LeanCounter<L extends string> extends LeanSeries<L, { value: number }> {
  readonly type = 'counter' as const;

  labels(...values: string[]): CounterSeries {
    const state = this.bind(values, () => ({ value: 0 }));
    return {
      inc: () => {
        state.value += 1;
      },
    };
  }

  async get(): Promise<Exposed> {
    const values = [...this.series.values()].map(({ labels, state }) => ({ labels, value: state.value }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

export interface HistogramSeries {
  observe(value: number): void;
}

interface Buckets {
  /** Per bucket, not cumulative; the last one is +Inf. */
  counts: Float64Array;
  sum: number;
  count: number;
}

export class LeanHistogram<L extends string> extends LeanSeries<L, Buckets> {
  readonly type = 'histogram' as const;
  private readonly bounds: readonly number[];

  constructor(name: string, help: string, labelNames: readonly L[], buckets: readonly number[], registers: readonly Registry[]) {
    super(name, help, labelNames, registers);
    this.bounds = [...buckets].sort((a, b) => a - b);
  }

  labels(...values: string[]): HistogramSeries {
    const bounds = this.bounds;
    const state = this.bind(values, () => ({ counts: new Float64Array(bounds.length + 1), sum: 0, count: 0 }));
    return {
      observe(value: number) {
        if (!Number.isFinite(value)) return;
        let i = 0;
        while (i < bounds.length && value > (bounds[i] as number)) i++;
        state.counts[i] = (state.counts[i] as number) + 1;
        state.sum += value;
        state.count += 1;
      },
    };
  }

  async get(): Promise<Exposed> {
    const values: Exposed['values'] = [];
    // `le` first, as prom-client writes its own histograms.
    for (const { labels, state } of this.series.values()) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += state.counts[i] as number;
        values.push({ labels: { le, ...labels }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { le: '+Inf', ...labels }, value: state.count, metricName: `${this.name}_bucket` });
      values.push({ labels, value: state.sum, metricName: `${this.name}_sum` });
      values.push({ labels, value: state.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
