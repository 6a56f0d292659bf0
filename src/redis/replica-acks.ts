/**
 * A replica's acknowledgement of what a Sentinel master took (session/unreplicated-writes.ts).
 */
import { commandTimeoutOf, disconnectRedis, duplicateConnection, isSentinelClient, type RedisClient } from './client.js';

export interface ReplicaAcks {
  /**
   * Whether a replica holds every write `client` had answered when this was called, within
   * `timeoutMs`: a mark is written after them on a connection of its own, and WAIT asks for
   * one replica's acknowledgement of it (the replication stream keeps the master's order). Its
   * own connection, because WAIT blocks the connection it is sent on, and the shared one
   * carries every proxied call. False on any failure.
   */
  acknowledged(timeoutMs: number): Promise<boolean>;
  /** Calls `listener` after each reconnect of `client` (a failover is one); returns its removal. */
  onReconnect(listener: () => void): () => void;
  close(): void;
}

/**
 * For a Sentinel client only: a single node has nothing to fail over to, and a Cluster's writes
 * go to many nodes (not covered, docs/operations.md).
 */
export function createReplicaAcks(client: RedisClient, markKey: string): ReplicaAcks | undefined {
  if (!isSentinelClient(client)) return undefined;
  const own = duplicateConnection(client);
  own.on('error', () => undefined);
  const timeoutMs = commandTimeoutOf(client);
  return {
    acknowledged(ms) {
      const asked = (async () => {
        // Connected on first use; ioredis reconnects it by itself after that.
        if (own.status === 'wait') await own.connect();
        await own.set(markKey, '1', 'PX', 60_000);
        return (await own.wait(1, ms)) >= 1;
      })().catch(() => false);
      // Bounded whatever hangs (a connect through a failover): a session's end waits on it.
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<boolean>((resolve) => (timer = setTimeout(resolve, ms + 2 * (timeoutMs ?? 1000), false)));
      return Promise.race([asked, bound]).finally(() => clearTimeout(timer));
    },
    onReconnect(listener) {
      client.on('ready', listener);
      return () => void client.off('ready', listener);
    },
    close: () => disconnectRedis(own),
  };
}
