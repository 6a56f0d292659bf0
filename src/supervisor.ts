/**
 * `server.workers` > 1: the primary of a node:cluster. It runs no gateway itself: it forks the
 * workers (each runs main() as a worker and shares the listening port), restarts a worker that
 * dies with a growing delay (and says so), serves the metrics port with every worker's metrics
 * summed, answers workers that need the sum for /metrics on the main port, and on stop asks
 * every worker to drain (SIGTERM: each finishes its in-flight requests within
 * shutdownTimeoutSeconds) and waits for them.
 *
 * All state lives in Redis, so workers need nothing from each other.
 */
import cluster, { type Worker } from 'node:cluster';
import http from 'node:http';
import type { Config } from './config/load.js';
import { createMetricsApp } from './http/metrics-server.js';
import type { Logger } from './observability/logger.js';
import { clusterMetricsSource } from './observability/metrics.js';
import { REFRESH_CLOSE_WAIT_MS } from './session/refresh.js';

/** Messages between a worker and the primary (besides prom-client's own). */
export const METRICS_REQUEST = 'bff:metrics-request';
export const METRICS_RESPONSE = 'bff:metrics-response';

export interface MetricsRequest {
  type: typeof METRICS_REQUEST;
  id: number;
}

export interface MetricsResponse {
  type: typeof METRICS_RESPONSE;
  id: number;
  contentType?: string;
  body?: string;
  failed?: boolean;
}

export interface Supervisor {
  /** Drains every worker (bounded) and closes the metrics port. */
  stop(): Promise<void>;
  /**
   * Settles (with the reason) if a worker exits before the cluster was ever fully up: a
   * startup failure (port taken, Redis unreachable, a bad secret), not a crash to restart.
   */
  failed: Promise<string>;
}

/** A worker that lived this long is healthy: its next crash starts the backoff afresh. */
const STABLE_MS = 30_000;
const FIRST_RESTART_DELAY_MS = 100;
const MAX_RESTART_DELAY_MS = 10_000;

function isMetricsRequest(message: unknown): message is MetricsRequest {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === METRICS_REQUEST;
}

export async function startSupervisor(config: Config, count: number, logger: Logger): Promise<Supervisor> {
  const sumOfWorkers = clusterMetricsSource();
  const startedAt = new Map<Worker, number>();
  let stopping = false;
  let crashes = 0;
  let restartTimer: NodeJS.Timeout | undefined;
  let listening = 0;
  let fail!: (reason: string) => void;
  const failed = new Promise<string>((resolve) => (fail = resolve));

  // Before any worker starts: a metrics port that cannot be had stops the cluster at once.
  const metricsServer =
    config.server.metricsPort === undefined ? undefined : http.createServer(createMetricsApp(sumOfWorkers, logger));
  if (metricsServer) {
    await new Promise<void>((resolve, reject) => {
      metricsServer.once('error', reject);
      metricsServer.listen(config.server.metricsPort, config.server.host, () => resolve());
    });
  }

  cluster.on('message', (worker, message: unknown) => {
    if (!isMetricsRequest(message)) return;
    sumOfWorkers().then(
      ({ contentType, body }) => worker.send({ type: METRICS_RESPONSE, id: message.id, contentType, body } satisfies MetricsResponse),
      (err: unknown) => {
        logger.warn({ event: 'cluster_metrics_failed', err }, 'collecting the workers’ metrics failed');
        worker.send({ type: METRICS_RESPONSE, id: message.id, failed: true } satisfies MetricsResponse);
      },
    );
  });

  function fork(): void {
    const worker = cluster.fork();
    startedAt.set(worker, performance.now());
    // Started means serving: the worker has built its runtime and listens on the shared port.
    let served = false;
    worker.once('listening', () => {
      served = true;
      listening += 1;
      logger.info({ event: 'worker_started', worker: worker.id, pid: worker.process.pid }, 'worker started');
    });
    worker.once('exit', (code, signal) => {
      const lived = performance.now() - (startedAt.get(worker) ?? performance.now());
      startedAt.delete(worker);
      if (stopping) return;
      if (!served && listening < count) {
        fail(`worker ${worker.id} exited (code ${code ?? signal}) before it could serve; see its output above`);
        return;
      }
      crashes = lived >= STABLE_MS ? 1 : crashes + 1;
      const delay = Math.min(FIRST_RESTART_DELAY_MS * 2 ** (crashes - 1), MAX_RESTART_DELAY_MS);
      logger.error(
        { event: 'worker_exited', worker: worker.id, pid: worker.process.pid, code, signal, restartInMs: delay },
        'a worker exited; starting another',
      );
      restartTimer = setTimeout(() => {
        if (!stopping) fork();
      }, delay);
    });
  }
  for (let i = 0; i < count; i++) fork();
  logger.info({ event: 'supervising', workers: count }, `supervising ${count} workers`);

  return {
    failed,
    async stop() {
      stopping = true;
      clearTimeout(restartTimer);
      const workers = [...startedAt.keys()];
      const exited = Promise.all(workers.map((w) => (w.isDead() ? Promise.resolve() : new Promise<void>((resolve) => w.once('exit', () => resolve())))));
      for (const worker of workers) worker.process.kill('SIGTERM');
      // Each worker bounds its own drain by shutdownTimeoutSeconds, then its wait for refreshes
      // under way (session/refresh.ts); one that hangs anyway is killed.
      const bound = setTimeout(() => {
        for (const worker of workers) if (!worker.isDead()) worker.process.kill('SIGKILL');
      }, config.server.shutdownTimeoutSeconds * 1000 + REFRESH_CLOSE_WAIT_MS + 5000);
      await exited;
      clearTimeout(bound);
      await new Promise<void>((resolve) => (metricsServer ? metricsServer.close(() => resolve()) : resolve()));
    },
  };
}
