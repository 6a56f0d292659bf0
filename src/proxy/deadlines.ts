/**
 * Deadlines for things in flight that all share one timeout (upstream requests waiting for
 * their response head), checked by one sweep timer instead of a timer and listeners per item.
 *
 * With one shared timeout, the order items start in is the order they expire in, so they are
 * kept in a doubly linked list and a sweep stops at the first item still in time. Tracking and
 * finishing are O(1) and allocate one small entry.
 *
 * Not a Map keyed by item: V8 allocates the rehashed tables of a long-lived Map in the old
 * generation, and an obsolete table keeps the keys it held (and a link to its successor) until
 * the next full collection. A Map that adds and deletes one key per request therefore keeps
 * every request's objects alive through scavenges and promotes them: the benchmark measured
 * ~5 KB promoted per proxied call, 10 ms scavenges, and a p99 4 ms over the bare proxy's
 * (docs/benchmarks.md). An entry that leaves the list drops all its references.
 */

const ENTRY = Symbol('deadline');

interface Entry<T> {
  item: T | undefined;
  expiresAt: number;
  prev: Entry<T> | undefined;
  next: Entry<T> | undefined;
}

type Tracked<T> = T & { [ENTRY]?: Entry<T> | undefined };

export interface DeadlineOptions<T> {
  timeoutMs: number;
  /** Called once for an item whose deadline passed before done(item). */
  expire(item: T): void;
  /** An item that already ended another way (e.g. a destroyed request) is dropped, not expired. */
  isSettled?(item: T): boolean;
  /** Monotonic milliseconds; performance.now by default. */
  now?: () => number;
}

export interface Deadlines<T extends object> {
  /** Starts the item's deadline (timeoutMs from now); tracking a tracked item does nothing. */
  track(item: T): void;
  /** The item is in time: forget it. Unknown or already expired items are ignored. */
  done(item: T): void;
  /** Items tracked, not yet done, expired or dropped. */
  readonly size: number;
  /** Forgets every item and stops the timer. */
  close(): void;
}

export function createDeadlines<T extends object>(options: DeadlineOptions<T>): Deadlines<T> {
  const { timeoutMs, expire, isSettled } = options;
  const now = options.now ?? (() => performance.now());
  // Often enough that a deadline is enforced within a quarter of the timeout, at most 4 times a second.
  const every = Math.max(10, Math.min(250, Math.floor(timeoutMs / 4)));
  let head: Entry<T> | undefined;
  let tail: Entry<T> | undefined;
  let size = 0;
  let sweeper: NodeJS.Timeout | undefined;

  function unlink(entry: Entry<T>): void {
    if (entry.prev) entry.prev.next = entry.next;
    else head = entry.next;
    if (entry.next) entry.next.prev = entry.prev;
    else tail = entry.prev;
    (entry.item as Tracked<T>)[ENTRY] = undefined;
    entry.item = entry.prev = entry.next = undefined;
    size -= 1;
  }

  function stop(): void {
    clearInterval(sweeper);
    sweeper = undefined;
  }

  function sweep(): void {
    const at = now();
    while (head !== undefined) {
      const entry = head;
      const item = entry.item as T;
      const settled = isSettled?.(item) ?? false;
      if (entry.expiresAt > at && !settled) break;
      unlink(entry);
      if (!settled) expire(item);
    }
    if (head === undefined) stop();
  }

  return {
    track(item) {
      const tracked = item as Tracked<T>;
      if (tracked[ENTRY] !== undefined) return;
      const entry: Entry<T> = { item, expiresAt: now() + timeoutMs, prev: tail, next: undefined };
      if (tail) tail.next = entry;
      else head = entry;
      tail = entry;
      tracked[ENTRY] = entry;
      size += 1;
      sweeper ??= setInterval(sweep, every).unref();
    },
    done(item) {
      const entry = (item as Tracked<T>)[ENTRY];
      if (entry !== undefined) unlink(entry);
    },
    get size() {
      return size;
    },
    close() {
      while (head !== undefined) unlink(head);
      stop();
    },
  };
}
