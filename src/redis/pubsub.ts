/**
 * The session-event bus's Redis transport: PUBLISH on the shared command connection, one
 * subscriber connection per process (redis/client.ts duplicateConnection) on one channel.
 *
 * Nothing here decides what a message means (session/events.ts does). What this file owns is
 * the connection's life: a subscriber that cannot connect at startup keeps retrying (ioredis
 * reconnects by itself and resubscribes), and every time it is back after having been lost
 * `onReconnect` runs, so that the instance re-checks the sessions it holds: events published
 * while it was away are lost to it (pub/sub keeps nothing).
 */
import { randomBytes } from 'node:crypto';
import { disconnectRedis, duplicateConnection, type RedisClient } from './client.js';

/**
 * The subscriber's connection, whatever its state: connect() only a client that is not already
 * connecting (ioredis refuses a second connect(); a Sentinel client may be reconnecting by
 * itself after a failover), else wait for it to be ready.
 */
function connected(sub: RedisClient): Promise<void> {
  if (sub.status === 'ready') return Promise.resolve();
  if (sub.status === 'wait' || sub.status === 'end') return sub.connect();
  return new Promise((resolve) => sub.once('ready', () => resolve()));
}

export interface BusTransport {
  /** Rejects when Redis is unreachable (the caller has already told its local listeners). */
  publish(message: string): Promise<void>;
  /** Starts listening; `onReconnect` runs each time the subscription is back after a loss. */
  listen(onMessage: (message: string) => void, onReconnect: () => void): void;
  close(): Promise<void>;
}

export interface RedisTransportOptions {
  /** Connection-level errors of the subscriber (it reconnects by itself). */
  onError?: (err: Error) => void;
  /** The subscription was found deaf (a probe of this process's did not come back) and renewed. */
  onRenewed?: () => void;
  /** How often the subscription is probed (ms; default PROBE_MS). */
  probeMs?: number;
}

/**
 * How often each process checks that its subscription hears: it publishes a probe of its own,
 * and one that has not come back by the next probe means a deaf subscriber. A connection whose
 * node hangs (a frozen Cluster node, a NAT that dropped the idle connection silently) is never
 * closed, so ioredis never reconnects it: its instance's streams of ended sessions stayed open
 * until their idle deadline. One PUBLISH per process per period; every instance receives every
 * probe (a 0.6.5 instance counts them as malformed events, and drops them).
 */
export const PROBE_MS = 5000;
/** Probes start so; every instance drops them (its own count as heard). */
const PROBE = 'probe:';

const asError = (err: unknown): Error => (err instanceof Error ? err : new Error(String(err)));

export function createRedisTransport(client: RedisClient, channel: string, options: RedisTransportOptions = {}): BusTransport {
  let subscriber: RedisClient | undefined;
  let probe: NodeJS.Timeout | undefined;
  let closed = false;
  return {
    async publish(message) {
      await client.publish(channel, message);
    },
    listen(onMessage, onReconnect) {
      const ownProbe = `${PROBE}${randomBytes(9).toString('base64url')}:`;
      let sent = 0;
      let heard = 0;
      /** The probe a deaf subscription would have missed: published, and a period given to come back. */
      let awaited: number | undefined;
      /** Whether the current subscriber has subscribed (a replaced one's listeners are gone). */
      let subscribed = false;

      /** `missed`: events may have been published while nothing heard them (a deaf subscription replaced). */
      function open(missed: boolean): void {
        const sub = duplicateConnection(client);
        subscriber = sub;
        subscribed = false;
        sub.on('error', (err: Error) => options.onError?.(err));
        sub.on('message', (from: string, message: string) => {
          if (from !== channel) return;
          if (message.startsWith(PROBE)) {
            if (message.startsWith(ownProbe)) heard = Math.max(heard, Number(message.slice(ownProbe.length)));
            return;
          }
          onMessage(message);
        });
        let lost = false;
        sub.on('close', () => {
          if (subscribed) lost = true;
        });
        // 'ready' comes after every (re)connect; ioredis has resubscribed by then.
        sub.on('ready', () => {
          if (!subscribed) return;
          if (lost) {
            lost = false;
            onReconnect();
          }
        });
        const start = () => {
          if (closed || subscriber !== sub) return;
          connected(sub)
            .then(() => sub.subscribe(channel))
            .then(() => {
              subscribed = true;
              // Events published before this subscription reached nobody here.
              if (missed) onReconnect();
            })
            .catch((err: unknown) => {
              options.onError?.(asError(err));
              // A first connection that failed is not retried by ioredis once connect() rejected
              // with lazyConnect: try again, bounded by closing.
              if (!subscribed && !closed) {
                missed = true;
                sub.disconnect();
                setTimeout(start, 1000).unref();
              }
            });
        };
        start();
      }

      function renew(): void {
        const deaf = subscriber as RedisClient;
        deaf.removeAllListeners();
        deaf.on('error', () => undefined);
        // Not deaf.disconnect(): its command-deadline tick would run on, holding the dead client,
        // one more per renewal for the life of the process (found by red team).
        disconnectRedis(deaf);
        awaited = undefined;
        options.onRenewed?.();
        open(true);
      }

      function check(): void {
        if (closed || !subscribed) return;
        if (awaited !== undefined && heard < awaited) return renew();
        awaited = undefined;
        const n = ++sent;
        // A probe Redis did not take proves nothing about the subscription.
        client.publish(channel, ownProbe + String(n)).then(
          () => {
            if (n === sent) awaited = n;
          },
          () => undefined,
        );
      }
      probe = setInterval(() => {
        // Nothing may escape a timer (an uncaught exception): a client may throw rather than reject.
        try {
          check();
        } catch (err) {
          options.onError?.(asError(err));
        }
      }, options.probeMs ?? PROBE_MS);
      probe.unref();
      open(false);
    },
    async close() {
      closed = true;
      clearInterval(probe);
      if (subscriber) disconnectRedis(subscriber);
    },
  };
}
