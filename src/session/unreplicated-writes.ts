/**
 * Writes a Sentinel master took that no replica had yet when the gateway answered: session
 * ends, and a refresh's new token set. Redis replicates asynchronously, and a master that died
 * before passing them on left its replica, once promoted, with the session alive (a logout
 * answered 200 undone; a back-channel logout the provider will not send again), or with the
 * token set whose refresh token the provider had already rotated away (the next refresh:
 * invalid_grant, the user signed out). Found by red team.
 *
 * After each such write the gateway asks for every connected replica's acknowledgement (WAIT, bounded). A
 * write not acknowledged is remembered and applied again after each reconnect of the client (a
 * failover is one: the client follows Sentinel to the promoted replica), until a WAIT on the
 * connection it was last applied through confirms it, or for `keepMs`. Applying again is safe:
 * an end of a session already gone ends nothing, and a token set is raised over any earlier
 * version (records.raiseTokens), never over a later one nor a deleted record. The answer is not held back: the write is done on the master, and a
 * replica that is down, not lagging, would otherwise hold every logout.
 *
 * This narrows the window to the writes of a process that dies with the master; it does not
 * make Redis strongly consistent (Redis documents as much of WAIT).
 */
import type { ReplicaAcks } from '../redis/replica-acks.js';

export interface UnreplicatedWrites {
  /**
   * After a write: returns once the replicas acknowledged it, or it is remembered, under `key`
   * (a later write of the same key replaces it), to be made again by `reapply`.
   */
  confirm(key: string, reapply: () => Promise<unknown>): Promise<void>;
  /** Writes remembered now. */
  readonly pending: number;
  close(): void;
}

export interface UnreplicatedWritesOptions {
  /** A replica's acknowledgement of the writes answered so far, and the client's reconnects. */
  acks: Pick<ReplicaAcks, 'acknowledged' | 'onReconnect'>;
  /** How long a write waits for a replica's acknowledgement (below the command timeout). */
  waitMs: number;
  /** How long a write is remembered (default 10 min). */
  keepMs?: number;
  /** How often remembered writes are confirmed again (default 1 s). */
  recheckMs?: number;
  /** A write was not acknowledged in time (logged by the owner). */
  onUnconfirmed?: () => void;
}

interface Remembered {
  reapply: () => Promise<unknown>;
  until: number;
  /** The connection (counted by reconnects) it was last made through. */
  appliedOn: number;
}

export function createUnreplicatedWrites(options: UnreplicatedWritesOptions): UnreplicatedWrites {
  const { acks, waitMs } = options;
  const keepMs = options.keepMs ?? 10 * 60_000;
  const recheckMs = options.recheckMs ?? 1000;
  const remembered = new Map<string, Remembered>();
  let connection = 0;
  let timer: NodeJS.Timeout | undefined;
  let checking = false;
  let closed = false;

  async function recheck(): Promise<void> {
    if (checking) return;
    checking = true;
    try {
      const on = connection;
      if (await acks.acknowledged(Math.min(100, waitMs))) {
        for (const [key, write] of remembered) if (write.appliedOn === on) remembered.delete(key);
      }
      const now = performance.now();
      for (const [key, write] of remembered) if (write.until <= now) remembered.delete(key);
    } finally {
      checking = false;
      if (remembered.size === 0 && timer) {
        clearInterval(timer);
        timer = undefined;
      }
    }
  }

  function reapply(key: string, write: Remembered, on: number): void {
    write.reapply().then(
      () => {
        if (remembered.get(key) === write) write.appliedOn = on;
      },
      () => undefined,
    );
  }
  function reapplyAll(): void {
    connection += 1;
    for (const [key, write] of remembered) reapply(key, write, connection);
  }
  // After every reconnect, the one to a promoted replica included.
  const stopListening = acks.onReconnect(reapplyAll);

  return {
    async confirm(key, again) {
      const on = connection;
      if ((await acks.acknowledged(waitMs)) || closed) return;
      options.onUnconfirmed?.();
      const write: Remembered = { reapply: again, until: performance.now() + keepMs, appliedOn: on };
      remembered.delete(key);
      remembered.set(key, write);
      timer ??= setInterval(() => void recheck(), recheckMs);
      timer.unref();
      // Reconnected while waiting: the reapplying that followed did not know of this write yet.
      if (on !== connection) reapply(key, write, connection);
    },
    get pending() {
      return remembered.size;
    },
    close() {
      closed = true;
      stopListening();
      if (timer) clearInterval(timer);
      timer = undefined;
      remembered.clear();
    },
  };
}
