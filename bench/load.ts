/**
 * The load generator, in a process of its own: autocannon's programmatic API at fixed
 * concurrency. autocannon's own latency histogram has 1 ms resolution, too coarse to compare
 * p99s within 2 ms, so every response time it reports (a float, in ms) is also kept here and
 * the percentiles are computed exactly from those.
 */
import autocannon from 'autocannon';
import { childOptions, guardChild, serveChild } from './lib/ipc.js';
import { percentile } from './lib/stats.js';

export interface LoadRun {
  url: string;
  headers: Record<string, string>;
  connections: number;
  durationSec: number;
}

export interface LoadResult {
  url: string;
  durationSec: number;
  /** Requests sent (some may still be in flight when the run stops). */
  sent: number;
  /** Responses received (any status). */
  responses: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** 2xx responses per second over the run. */
  rps: number;
  latencyMs: { mean: number; p50: number; p90: number; p99: number; max: number };
}

function run(args: LoadRun): Promise<LoadResult> {
  let latencies = new Float64Array(1 << 16);
  let n = 0;
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      { url: args.url, connections: args.connections, duration: args.durationSec, headers: args.headers, timeout: 10 },
      (err, result) => {
        if (err) return reject(err);
        const sorted = latencies.subarray(0, n).sort();
        let sum = 0;
        for (let i = 0; i < n; i++) sum += sorted[i] as number;
        resolve({
          url: args.url,
          durationSec: result.duration,
          sent: (result.requests as unknown as { sent: number }).sent,
          responses: n,
          ok: result['2xx'],
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          rps: result['2xx'] / result.duration,
          latencyMs: {
            mean: n ? sum / n : 0,
            p50: percentile(sorted, 0.5),
            p90: percentile(sorted, 0.9),
            p99: percentile(sorted, 0.99),
            max: n ? (sorted[n - 1] as number) : 0,
          },
        });
      },
    );
    instance.on('response', (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
      if (n === latencies.length) {
        const bigger = new Float64Array(latencies.length * 2);
        bigger.set(latencies);
        latencies = bigger;
      }
      latencies[n++] = responseTime;
    });
  });
}

guardChild(async () => {
  childOptions<Record<string, never>>();
  serveChild({}, { run: (args: LoadRun) => run(args) });
});
