/**
 * Messages between the cluster primary and its workers, both sides.
 *
 * A send that cannot throw: a worker that died has no channel, and Worker#send without a
 * callback then emits 'error' on the Worker; with no listener the primary died of it and
 * node:cluster ended every other worker, undrained (found by the workers red team: a worker
 * killed while the primary summed metrics for it). And a question to every worker that is
 * answered by those that answer in time: one hung worker made every metrics scrape fail.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Metrics, MetricsSource } from './observability/metrics.js';

/** The primary's heartbeat, and a worker's answer (supervisor.ts). */
export const HEARTBEAT = 'bff:heartbeat';
export const HEARTBEAT_ANSWER = 'bff:heartbeat-answer';
/** The primary asks every worker for its metrics (as prom-client's getMetricsAsJSON). */
const WORKER_METRICS_REQUEST = 'bff:worker-metrics-request';
const WORKER_METRICS_RESPONSE = 'bff:worker-metrics-response';
/** A worker asks the primary for the sum over workers (/metrics on the main port). */
export const METRICS_REQUEST = 'bff:metrics-request';
export const METRICS_RESPONSE = 'bff:metrics-response';

export interface Message {
  type: string;
  id?: number;
}

interface WorkerMetricsResponse extends Message {
  type: typeof WORKER_METRICS_RESPONSE;
  id: number;
  metrics?: unknown[];
}

export interface MetricsResponse extends Message {
  type: typeof METRICS_RESPONSE;
  id: number;
  contentType?: string;
  body?: string;
  failed?: boolean;
}

export function isMessage<T extends Message = Message>(message: unknown, type: T['type']): message is T {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type;
}

/** In the primary: sends if the worker is still connected; a send that fails is dropped. */
export function sendToWorker(worker: Worker, message: Message & Record<string, unknown>): void {
  if (worker.isConnected()) worker.send(message, () => undefined);
}

/** In a worker: sends if the primary is still connected; a send that fails is dropped. */
function sendToPrimary(message: Message & Record<string, unknown>): void {
  if (process.connected) process.send?.(message, undefined, undefined, () => undefined);
}

export interface Gathered {
  /** Each answering worker's `metrics`, in no particular order. */
  answers: unknown[][];
  /** Workers asked that did not answer within the deadline (or answered a failure). */
  unanswered: number;
}

/**
 * How long the primary waits for the workers' metrics: past a worker's slowest collect (its Redis
 * reads fail within the command timeout).
 */
const gatherDeadlineMs = (commandTimeoutMs: number): number => commandTimeoutMs + 2000;

/**
 * In the primary: asks every connected worker for its metrics and settles once all have
 * answered or the deadline (gatherDeadlineMs) has passed, with what came. A late answer is dropped.
 */
export function createWorkerMetricsGatherer(commandTimeoutMs: number): () => Promise<Gathered> {
  const deadlineMs = gatherDeadlineMs(commandTimeoutMs);
  let next = 0;
  const pending = new Map<number, (worker: Worker, answer: WorkerMetricsResponse) => void>();
  cluster.on('message', (worker, message: unknown) => {
    if (isMessage<WorkerMetricsResponse>(message, WORKER_METRICS_RESPONSE)) pending.get(message.id)?.(worker, message);
  });
  return () =>
    new Promise((resolve) => {
      const id = next++;
      const asked = new Set(Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected()));
      const answers: unknown[][] = [];
      let failed = 0;
      const settle = () => {
        clearTimeout(timer);
        pending.delete(id);
        resolve({ answers, unanswered: asked.size + failed });
      };
      const timer = setTimeout(settle, deadlineMs);
      pending.set(id, (worker, answer) => {
        if (!asked.delete(worker)) return;
        if (Array.isArray(answer.metrics)) answers.push(answer.metrics);
        else failed += 1;
        if (asked.size === 0) settle();
      });
      if (asked.size === 0) return settle();
      for (const worker of asked) sendToWorker(worker, { type: WORKER_METRICS_REQUEST, id });
    });
}

/**
 * In a cluster worker, from its first moment: heartbeats are answered at once (a worker still
 * building its runtime is alive), and the primary's requests for metrics with this process's
 * (none until its runtime exists).
 */
export function answerPrimary(): { share(registry: Metrics['registry']): void } {
  let shared: Metrics['registry'] | undefined;
  process.on('message', (message: unknown) => {
    if (isMessage(message, HEARTBEAT)) {
      sendToPrimary({ type: HEARTBEAT_ANSWER });
    } else if (isMessage(message, WORKER_METRICS_REQUEST)) {
      const id = message.id;
      const answer = (metrics?: unknown[]) => sendToPrimary({ type: WORKER_METRICS_RESPONSE, id, ...(metrics ? { metrics } : {}) });
      (shared ? shared.getMetricsAsJSON() : Promise.resolve([])).then(answer, () => answer());
    }
  });
  return { share: (registry) => void (shared = registry) };
}

/**
 * In a cluster worker: the primary's sum of every worker's metrics, asked over IPC, waited for
 * longer than the primary waits for the workers (or a hung worker failed the scrape).
 */
export function metricsFromPrimary(commandTimeoutMs: number): MetricsSource {
  const timeoutMs = gatherDeadlineMs(commandTimeoutMs) + 2000;
  let next = 0;
  const pending = new Map<number, (answer: MetricsResponse | undefined) => void>();
  process.on('message', (message: unknown) => {
    if (isMessage<MetricsResponse>(message, METRICS_RESPONSE)) pending.get(message.id)?.(message);
  });
  return () =>
    new Promise((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => settle(undefined), timeoutMs);
      function settle(answer: MetricsResponse | undefined): void {
        clearTimeout(timer);
        pending.delete(id);
        if (!answer || answer.failed || answer.body === undefined) reject(new Error('the cluster primary did not provide metrics'));
        else resolve({ contentType: answer.contentType ?? 'text/plain; version=0.0.4; charset=utf-8', body: answer.body });
      }
      pending.set(id, settle);
      sendToPrimary({ type: METRICS_REQUEST, id });
    });
}
