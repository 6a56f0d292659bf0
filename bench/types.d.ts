// autocannon ships no type declarations; the bench uses a small part of its programmatic API.
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  interface AutocannonOptions {
    url: string;
    connections?: number;
    duration?: number;
    headers?: Record<string, string>;
    method?: string;
    timeout?: number;
    pipelining?: number;
  }

  interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p99: number;
    [k: string]: number;
  }

  export interface AutocannonResult {
    duration: number;
    requests: Histogram;
    latency: Histogram;
    throughput: Histogram;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    [k: string]: unknown;
  }

  interface Instance extends EventEmitter {
    stop(): void;
  }

  function autocannon(opts: AutocannonOptions, cb: (err: Error | null, result: AutocannonResult) => void): Instance;
  export default autocannon;
}
