/**
 * `server.workers` > 1: the primary of a node:cluster. It runs no gateway itself: it forks the
 * workers (each runs main() as a worker and shares the listening port), restarts a worker that
 * dies with a growing delay (and says so), kills one that answers no heartbeat for
 * workerUnresponsiveSeconds (then restarted the same way), serves the metrics port with the
 * metrics of every worker that answers in time summed, answers workers that need the sum for
 * /metrics on the main port, and on stop asks every worker to drain (SIGTERM: each finishes its
 * in-flight requests within shutdownTimeoutSeconds) and waits for them.
 *
 * All state lives in Redis, so workers need nothing from each other.
 */
import { MAX_TIMER_MS } from './clock.js';
import cluster, { type Worker } from 'node:cluster';
import http from 'node:http';
import type { Config } from './config/load.js';
import { createMetricsApp } from './http/metrics-server.js';
import type { Logger } from './observability/logger.js';
import { sumWorkerMetrics, type MetricsSource } from './observability/metrics.js';
import { REFRESH_CLOSE_WAIT_MS } from './session/refresh.js';
import { createWorkerMetricsGatherer, HEARTBEAT, HEARTBEAT_ANSWER, isMessage, METRICS_REQUEST, METRICS_RESPONSE, sendToWorker } from './worker-ipc.js';

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

export async function startSupervisor(config: Config, count: number, logger: Logger): Promise<Supervisor> {
  const gather = createWorkerMetricsGatherer(config.redis.commandTimeoutMs);
  const sumOfWorkers: MetricsSource = async () => {
    const { answers, unanswered } = await gather();
    return sumWorkerMetrics(answers, unanswered);
  };
  const startedAt = new Map<Worker, number>();
  /** When each serving worker last answered a heartbeat. */
  const heardAt = new Map<Worker, number>();
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
    if (isMessage(message, HEARTBEAT_ANSWER)) {
      if (heardAt.has(worker)) heardAt.set(worker, performance.now());
      return;
    }
    if (!isMessage(message, METRICS_REQUEST)) return;
    const id = message.id;
    sumOfWorkers().then(
      ({ contentType, body }) => sendToWorker(worker, { type: METRICS_RESPONSE, id, contentType, body }),
      (err: unknown) => {
        logger.warn({ event: 'cluster_metrics_failed', err }, 'collecting the workers’ metrics failed');
        sendToWorker(worker, { type: METRICS_RESPONSE, id, failed: true });
      },
    );
  });

  // A worker whose event loop stopped turning (SIGSTOP, a blocked loop) kept its accepted and
  // kept-alive connections hanging for good while /healthz, answered by the others, said all
  // was well (found by the workers red team). It is killed, and restarted as after a crash.
  const unresponsiveMs = config.server.workerUnresponsiveSeconds * 1000;
  const beatMs = Math.max(250, Math.floor(unresponsiveMs / 4));
  let lastBeat = performance.now();
  // Also while draining: a hung worker is then killed within this, not at the drain's bound.
  const heartbeat = setInterval(() => {
    // A beat this late means the primary itself did not run (stopped, its container paused):
    // the workers were not asked meanwhile, and their silence says nothing. Killing them all on
    // resuming cut every call (found by review); they are heard afresh from now.
    const late = performance.now() - lastBeat > 2 * beatMs;
    lastBeat = performance.now();
    if (late) for (const worker of heardAt.keys()) heardAt.set(worker, lastBeat);
    for (const [worker, heard] of heardAt) {
      if (performance.now() - heard > unresponsiveMs) {
        heardAt.delete(worker);
        logger.error(
          { event: 'worker_unresponsive', worker: worker.id, pid: worker.process.pid, silentMs: Math.round(performance.now() - heard) },
          'a worker answered no heartbeat; killing it',
        );
        worker.process.kill('SIGKILL');
      } else {
        sendToWorker(worker, { type: HEARTBEAT });
      }
    }
  }, beatMs);
  heartbeat.unref();

  function fork(): void {
    const worker = cluster.fork();
    startedAt.set(worker, performance.now());
    // Started means serving: the worker has built its runtime and listens on the shared port.
    let served = false;
    // A channel that fails to send (the worker died meanwhile) must not end the primary.
    worker.on('error', (err) => logger.warn({ event: 'worker_ipc_error', worker: worker.id, err }, 'a message to a worker failed'));
    worker.once('listening', () => {
      served = true;
      listening += 1;
      // Watched from when it serves: loading and connecting may be slow on a busy host.
      heardAt.set(worker, performance.now());
      logger.info({ event: 'worker_started', worker: worker.id, pid: worker.process.pid }, 'worker started');
    });
    worker.once('exit', (code, signal) => {
      const lived = performance.now() - (startedAt.get(worker) ?? performance.now());
      startedAt.delete(worker);
      heardAt.delete(worker);
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
        for (const worker of workers) {
          if (worker.isDead()) continue;
          logger.error({ event: 'worker_killed', worker: worker.id, pid: worker.process.pid }, 'a worker did not drain in time; killed (its calls in flight are cut)');
          worker.process.kill('SIGKILL');
        }
      }, Math.min(config.server.shutdownTimeoutSeconds * 1000 + REFRESH_CLOSE_WAIT_MS + 5000, MAX_TIMER_MS));
      await exited;
      clearTimeout(bound);
      clearInterval(heartbeat);
      await new Promise<void>((resolve) => (metricsServer ? metricsServer.close(() => resolve()) : resolve()));
    },
  };
}
