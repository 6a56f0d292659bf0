/**
 * Ends a Sentinel master took that no replica had yet when the gateway answered. Redis
 * replicates asynchronously: a master that died before passing a logout on left its replica,
 * once promoted, with the session alive, so a logout answered 200 was undone, and a back-channel
 * logout the provider will not send again with it (found by red team).
 *
 * After each end the gateway asks for one replica's acknowledgement (WAIT, bounded). An end not
 * acknowledged is remembered and applied again after each reconnect of the client (a failover is
 * one: the client follows Sentinel to the promoted replica), until a WAIT on the connection it was
 * last applied through confirms it, or for `keepMs`. The answer is not held back: the end is done
 * on the master, and a replica that is down, not lagging, would otherwise hold every logout.
 *
 * This narrows the window to the ends of a process that dies with the master; it does not make
 * Redis strongly consistent (Redis documents as much of WAIT).
 */
import type { ReplicaAcks } from '../redis/client.js';
import type { EndReason } from './events.js';

export interface UnreplicatedEnds {
  /** After an end: returns once a replica acknowledged it, or it is remembered to apply again. */
  confirm(digest: string, reason: EndReason, revokes: boolean): Promise<void>;
  /** Ends remembered now. */
  readonly pending: number;
  close(): void;
}

export interface UnreplicatedEndsOptions {
  /** A replica's acknowledgement of the writes answered so far, and the client's reconnects. */
  acks: Pick<ReplicaAcks, 'acknowledged' | 'onReconnect'>;
  /** How long an end waits for a replica's acknowledgement (below the command timeout). */
  waitMs: number;
  /** Ends the session again (idempotent: a session already gone stays gone). */
  reapply: (digest: string, reason: EndReason, revokes: boolean) => Promise<void>;
  /** How long an end is remembered (default 10 min). */
  keepMs?: number;
  /** How often remembered ends are confirmed again (default 1 s). */
  recheckMs?: number;
  /** An end was not acknowledged in time (logged and counted by the owner). */
  onUnconfirmed?: () => void;
}

interface Remembered {
  reason: EndReason;
  revokes: boolean;
  until: number;
  /** The connection (counted by reconnects) it was last applied through. */
  appliedOn: number;
}

export function createUnreplicatedEnds(options: UnreplicatedEndsOptions): UnreplicatedEnds {
  const { acks, waitMs } = options;
  const keepMs = options.keepMs ?? 10 * 60_000;
  const recheckMs = options.recheckMs ?? 1000;
  const remembered = new Map<string, Remembered>();
  let connection = 0;
  let timer: NodeJS.Timeout | undefined;
  let checking = false;

  async function recheck(): Promise<void> {
    if (checking) return;
    checking = true;
    try {
      const on = connection;
      if (await acks.acknowledged(Math.min(100, waitMs))) {
        for (const [digest, end] of remembered) if (end.appliedOn === on) remembered.delete(digest);
      }
      const now = performance.now();
      for (const [digest, end] of remembered) if (end.until <= now) remembered.delete(digest);
    } finally {
      checking = false;
      if (remembered.size === 0 && timer) {
        clearInterval(timer);
        timer = undefined;
      }
    }
  }

  function reapply(digest: string, end: Remembered, on: number): void {
    options.reapply(digest, end.reason, end.revokes).then(
      () => {
        if (remembered.get(digest) === end) end.appliedOn = on;
      },
      () => undefined,
    );
  }
  function reapplyAll(): void {
    connection += 1;
    for (const [digest, end] of remembered) reapply(digest, end, connection);
  }
  // After every reconnect, the one to a promoted replica included.
  const stopListening = acks.onReconnect(reapplyAll);

  return {
    async confirm(digest, reason, revokes) {
      const on = connection;
      if (await acks.acknowledged(waitMs)) return;
      options.onUnconfirmed?.();
      const end: Remembered = { reason, revokes, until: performance.now() + keepMs, appliedOn: on };
      remembered.set(digest, end);
      timer ??= setInterval(() => void recheck(), recheckMs);
      timer.unref();
      // Reconnected while waiting: the reapplying that followed did not know of this end yet.
      if (on !== connection) reapply(digest, end, connection);
    },
    get pending() {
      return remembered.size;
    },
    close() {
      stopListening();
      if (timer) clearInterval(timer);
      timer = undefined;
      remembered.clear();
    },
  };
}
