/**
 * The session-event bus's Redis transport: PUBLISH on the shared command connection, one
 * subscriber connection per process (redis/client.ts createSubscriber) on one channel.
 *
 * Nothing here decides what a message means (session/events.ts does). What this file owns is
 * the connection's life: a subscriber that cannot connect at startup keeps retrying (ioredis
 * reconnects by itself and resubscribes), and every time it is back after having been lost
 * `onReconnect` runs, so that the instance re-checks the sessions it holds: events published
 * while it was away are lost to it (pub/sub keeps nothing).
 */
import { createSubscriber, disconnectRedis, type RedisClient } from './client.js';

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
}

export function createRedisTransport(client: RedisClient, channel: string, options: RedisTransportOptions = {}): BusTransport {
  let subscriber: RedisClient | undefined;
  let closed = false;
  return {
    async publish(message) {
      await client.publish(channel, message);
    },
    listen(onMessage, onReconnect) {
      const sub = createSubscriber(client);
      subscriber = sub;
      sub.on('error', (err: Error) => options.onError?.(err));
      sub.on('message', (from: string, message: string) => {
        if (from === channel) onMessage(message);
      });
      let subscribed = false;
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
      let failed = false;
      const start = () => {
        if (closed) return;
        connected(sub)
          .then(() => sub.subscribe(channel))
          .then(() => {
            subscribed = true;
            // Events published before this first subscription reached nobody here.
            if (failed) onReconnect();
          })
          .catch((err: unknown) => {
            options.onError?.(err instanceof Error ? err : new Error(String(err)));
            // A first connection that failed is not retried by ioredis once connect() rejected
            // with lazyConnect: try again, bounded by closing.
            if (!subscribed && !closed) {
              failed = true;
              sub.disconnect();
              setTimeout(start, 1000).unref();
            }
          });
      };
      start();
    },
    async close() {
      closed = true;
      if (subscriber) disconnectRedis(subscriber);
    },
  };
}
