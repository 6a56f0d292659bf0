/**
 * A replica's acknowledgement of what a Sentinel master took (session/unreplicated-writes.ts).
 */
import { commandTimeoutOf, disconnectRedis, duplicateConnection, isSentinelClient, type RedisClient } from './client.js';
import { within } from '../clock.js';

export interface ReplicaAcks {
  /**
   * Whether every replica holds every write `client` had answered when this was called, within
   * `timeoutMs`: a mark is written after them on a connection of its own, and WAIT asks for the
   * acknowledgement of each replica connected (the replication stream keeps the master's order).
   * Its own connection, because WAIT blocks the connection it is sent on, and the shared one
   * carries every proxied call. False on any failure, and while fewer replicas are connected
   * than were within FORGET_REPLICA_MS (counted every OBSERVE_MS too): one cut off (the one
   * Sentinel may promote) must not be outvoted by one that Sentinel will never promote
   * (`replica-priority 0`; found by review).
   * Calls made while one is under way share the next.
   */
  acknowledged(timeoutMs: number): Promise<boolean>;
  /** Calls `listener` after each reconnect of `client` (a failover is one); returns its removal. */
  onReconnect(listener: () => void): () => void;
  close(): void;
}

/** How long a replica once connected is waited for after it went (then it is taken as removed). */
const FORGET_REPLICA_MS = 10 * 60_000;
/** How often the replicas connected are counted between writes (a cut may come before any write). */
const OBSERVE_MS = 5_000;

/**
 * For a Sentinel client only: a single node has nothing to fail over to, and a Cluster's writes
 * go to many nodes (not covered, docs/operations.md).
 */
export function createReplicaAcks(client: RedisClient, markKey: string): ReplicaAcks | undefined {
  if (!isSentinelClient(client)) return undefined;
  const own = duplicateConnection(client);
  own.on('error', () => undefined);
  const timeoutMs = commandTimeoutOf(client);
  let expected = 0;
  let allSeenAt = performance.now();
  let connecting: Promise<void> | undefined;
  let inFlight: Promise<boolean> | undefined;
  let queued: Promise<boolean> | undefined;

  /** The replicas connected to the master now (undefined when not connected to a master). */
  async function observe(): Promise<number | undefined> {
    // Connected on first use, once for every caller; ioredis reconnects it by itself after that.
    if (own.status === 'wait' || connecting) await (connecting ??= own.connect().finally(() => (connecting = undefined)));
    const role = (await own.call('ROLE')) as [string, unknown, unknown];
    if (role[0] !== 'master') return undefined;
    const connected = Array.isArray(role[2]) ? role[2].length : 0;
    const now = performance.now();
    if (connected >= expected || now - allSeenAt > FORGET_REPLICA_MS) {
      expected = connected;
      allSeenAt = now;
    }
    return connected;
  }
  void observe().catch(() => undefined);
  const watch = setInterval(() => void observe().catch(() => undefined), OBSERVE_MS);
  watch.unref();

  async function ask(ms: number): Promise<boolean> {
    const connected = await observe();
    if (!connected) return false;
    await own.set(markKey, '1', 'PX', 60_000);
    return (await own.wait(connected, ms)) >= expected;
  }

  /** One round, bounded whatever hangs (a connect through a failover). */
  const round = (ms: number): Promise<boolean> => within(ask(ms).catch(() => false), ms + 2 * (timeoutMs ?? 1000), false);

  function acknowledged(ms: number): Promise<boolean> {
    if (inFlight === undefined) {
      inFlight = round(ms).finally(() => (inFlight = undefined));
      return inFlight;
    }
    // The round under way may have written its mark before this caller's write: the next one.
    queued ??= inFlight.then(() => {
      queued = undefined;
      return acknowledged(ms);
    });
    return queued;
  }

  return {
    acknowledged,
    onReconnect(listener) {
      client.on('ready', listener);
      return () => void client.off('ready', listener);
    },
    close() {
      clearInterval(watch);
      disconnectRedis(own);
    },
  };
}
