/**
 * `redis.commandTimeoutMs` for a single-node or Sentinel client with one timer per client, not
 * one per command.
 *
 * Why: ioredis's own `commandTimeout` arms a `setTimeout` when it sends a command and clears it
 * when the reply comes: on the proxy path that is a timer object, two timer-list updates and a
 * closure for every call's one GETEX (about 1.3 µs a call, docs/benchmarks.md), to catch a
 * Redis that almost never stalls.
 *
 * How: ioredis keeps the commands awaiting an answer on a connection in the order they were
 * sent (`commandQueue`), and a reply (or an error reply) always settles the oldest. A tick every
 * `timeoutMs / 10` labels the commands sent since the previous tick, walking back from the
 * newest, with the tick's number; a command answered between two ticks is never touched. Once a
 * tick is `timeoutMs` old, every command still queued with its label or an older one fails with
 * ioredis's own error ("Command timed out"): sent before that tick, it is at least `timeoutMs`
 * old, and at most two ticks more. Labels only grow along the queue, so the commands already
 * failed are skipped by a binary search: a long stall costs each command one label and one
 * rejection, as ioredis's timers did.
 *
 * As with ioredis's timer, a failed command stays in the queue until Redis answers it or the
 * connection closes; its late answer is dropped. A connection that closes takes its queue with
 * it (ioredis fails what was in flight), and the next one starts a new queue.
 *
 * This rests on the client options of redis/client.ts: `maxRetriesPerRequest: 0` and no
 * `reconnectOnError`, so no command is ever sent again onto a new connection behind commands
 * sent after it (which would break the labels' order along the queue).
 */
import type { Redis } from 'ioredis';

/** The tick a command was first seen in flight at (a property ioredis never reads). */
const TICK = Symbol('bff.sentAtTick');

/** What of ioredis a command and its queue are read through (the public `commandQueue`). */
interface InFlight {
  [TICK]?: number;
  reject(err: Error): void;
}
interface CommandQueue {
  readonly length: number;
  peekAt(index: number): { command: InFlight } | undefined;
}

export interface CommandDeadlines {
  /** Stops the tick (the client's close). */
  stop(): void;
}

/** Ticks per timeout: a command fails at most two tenths of the timeout late. */
const TICKS = 10;
const MIN_TICK_MS = 5;

/**
 * Fails `client`'s commands that go unanswered for `timeoutMs`. The client must be created
 * without ioredis's `commandTimeout` (both would only fail the same command twice).
 */
export function enforceCommandDeadlines(client: Redis, timeoutMs: number, now: () => number = performance.now.bind(performance)): CommandDeadlines {
  const tickMs = Math.max(MIN_TICK_MS, Math.floor(timeoutMs / TICKS));
  let tick = 0;
  /** When each recent tick ran, oldest first: [tick number, time]. */
  const ticks: Array<[number, number]> = [];
  /**
   * Commands labelled up to this tick have been failed. Ticks only grow, and a new connection's
   * queue holds only commands labelled after it opened, so this needs no reset on a reconnect.
   */
  let failedThrough = 0;

  const run = () => {
    const t = now();
    tick++;
    ticks.push([tick, t]);
    const queue = client.commandQueue as unknown as CommandQueue;
    label(queue, tick);
    let due = 0;
    while (ticks.length > 0 && t - (ticks[0] as [number, number])[1] >= timeoutMs) due = (ticks.shift() as [number, number])[0];
    if (due > failedThrough) {
      failBetween(queue, failedThrough, due);
      failedThrough = due;
    }
  };
  const timer = setInterval(run, tickMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/** Labels the commands sent since the last tick: the unlabelled tail of the queue. */
function label(queue: CommandQueue, tick: number): void {
  for (let i = queue.length - 1; i >= 0; i--) {
    const command = (queue.peekAt(i) as { command: InFlight }).command;
    if (command[TICK] !== undefined) return;
    command[TICK] = tick;
  }
}

/** Fails the queued commands labelled after `after` and up to `through`. */
function failBetween(queue: CommandQueue, after: number, through: number): void {
  // The first command labelled after `after`: labels never decrease along the queue.
  let lo = 0;
  let hi = queue.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (((queue.peekAt(mid) as { command: InFlight }).command[TICK] ?? Infinity) <= after) lo = mid + 1;
    else hi = mid;
  }
  for (let i = lo; i < queue.length; i++) {
    const command = (queue.peekAt(i) as { command: InFlight }).command;
    if ((command[TICK] ?? Infinity) > through) return;
    command.reject(new Error('Command timed out'));
  }
}
