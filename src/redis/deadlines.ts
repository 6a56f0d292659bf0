/**
 * `redis.commandTimeoutMs` for a single-node or Sentinel client with one timer per client, not
 * one per command.
 *
 * Why: ioredis's own `commandTimeout` arms a `setTimeout` when it sends a command and clears it
 * when the reply comes: on the proxy path that is a timer object, two timer-list updates and a
 * closure for every call's one GETEX (about 1.3 µs a call, docs/benchmarks.md), to catch a
 * Redis that almost never stalls.
 *
 * How: one connection answers its commands in the order they were sent, and ioredis keeps the
 * commands awaiting an answer in that order (`commandQueue`). A tick every `timeoutMs / 10`
 * remembers the newest command in flight; once a remembered command is `timeoutMs` old and still
 * unanswered, it and every unanswered command sent before it fail with ioredis's own error
 * ("Command timed out"). Nothing is done per command: a stalled Redis still fails each command
 * between `timeoutMs` and `timeoutMs` plus one tick after it was sent, as before.
 *
 * As with ioredis's timer, a failed command stays in the queue until Redis answers it or the
 * connection closes; its late answer is dropped.
 */
import type { Redis } from 'ioredis';

/** What of ioredis a command queue is read through (its public `commandQueue`). */
interface InFlight {
  readonly isResolved: boolean;
  reject(err: Error): void;
}
interface CommandQueue {
  readonly length: number;
  peekAt(index: number): { command: InFlight } | undefined;
  peekBack(): { command: InFlight } | undefined;
}

export interface CommandDeadlines {
  /** Stops the tick (the client's close). */
  stop(): void;
}

/** A tick's note: the newest command in flight then, and when. */
interface Mark {
  at: number;
  command: InFlight;
}

/** Ticks per timeout: a command fails at most a tenth of the timeout late. */
const TICKS = 10;
const MIN_TICK_MS = 5;

/**
 * Fails `client`'s commands that go unanswered for `timeoutMs`. The client must be created
 * without ioredis's `commandTimeout` (both would only fail the same command twice).
 */
export function enforceCommandDeadlines(client: Redis, timeoutMs: number, now: () => number = performance.now.bind(performance)): CommandDeadlines {
  const tickMs = Math.max(MIN_TICK_MS, Math.floor(timeoutMs / TICKS));
  // Oldest first; at most TICKS + 1 entries (a mark is dropped once it is due).
  const marks: Mark[] = [];

  const tick = () => {
    const t = now();
    const queue = client.commandQueue as unknown as CommandQueue;
    let due: InFlight | undefined;
    while (marks.length > 0 && t - (marks[0] as Mark).at >= timeoutMs) due = (marks.shift() as Mark).command;
    if (due !== undefined && !due.isResolved) failUpTo(queue, due);
    const newest = queue.peekBack()?.command;
    if (newest !== undefined && !newest.isResolved && marks.at(-1)?.command !== newest) marks.push({ at: t, command: newest });
  };
  const timer = setInterval(tick, tickMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/**
 * Every unanswered command up to `due`, which was sent before it. `due` unanswered means it is
 * still queued (ioredis rejects what it drops from the queue), so the walk finds it.
 */
function failUpTo(queue: CommandQueue, due: InFlight): void {
  for (let i = 0; i < queue.length; i++) {
    const command = queue.peekAt(i)?.command;
    if (command === undefined) return;
    if (!command.isResolved) command.reject(new Error('Command timed out'));
    if (command === due) return;
  }
}
