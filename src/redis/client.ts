/**
 * The one home of ioredis. Connection policy (SPEC §7): a command slower than
 * `commandTimeoutMs` fails, and nothing queues while disconnected, so a stalled or absent Redis
 * turns into a fast 503 instead of requests piling up; reconnection is automatic.
 */
import { isIP } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import { Redis, Cluster, type RedisOptions, type ClusterOptions } from 'ioredis';
import type { RedisConfig } from '../config/schema.js';
import { isTlsNode, nodeUrl } from '../config/redis-node.js';
import { enforceCommandDeadlines, type CommandDeadlines } from './deadlines.js';

export type RedisClient = Redis | Cluster;

/** Redis's and Sentinel's own ports: what a node written without one listens on. */
export const REDIS_PORT = 6379;
export const SENTINEL_PORT = 26379;
/** How often a Cluster client re-reads the slot map (CLUSTER SLOTS on one node). */
const SLOTS_REFRESH_MS = 2000;
/** How soon a command refused with TRYAGAIN (a slot being migrated) is sent again. */
const TRY_AGAIN_MS = 100;

/** A node (`host[:port]` or a redis(s):// URL, as schema.ts allows) as ioredis takes it. */
export function hostPort(node: string, defaultPort = REDIS_PORT): { host: string; port: number } {
  const url = nodeUrl(node);
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || defaultPort) };
}

/** Certificates checked whatever the environment says (NODE_TLS_REJECT_UNAUTHORIZED is refused at startup too). */
const verified = (): ConnectionOptions => ({ rejectUnauthorized: true });

/** A single node's TLS: its host name as SNI too (Node sends none unless told; never an IP). */
function tlsFor(url: string): ConnectionOptions {
  const host = hostPort(url).host;
  return isIP(host) ? verified() : { ...verified(), servername: host };
}

/** The longest wait between two attempts to reach Redis again. */
export const RECONNECT_MAX_MS = 500;

/**
 * The wait before reconnection attempt `attempt` (1, 2, ...): 100 ms doubling to at most
 * RECONNECT_MAX_MS, less up to a fifth at random, so processes that lost Redis together do not
 * knock in step. A refused connection costs next to nothing; waiting up to 2 s answered 503 for
 * that long after Redis was back, and a Redis flapping in windows of a second was missed
 * whole (found by the flapping red team). An unreachable host is bounded by connectTimeout.
 */
export function reconnectDelayMs(attempt: number, random: () => number = Math.random): number {
  return Math.round(Math.min(50 * 2 ** Math.min(attempt, 4), RECONNECT_MAX_MS) * (1 - random() * 0.2));
}

export interface CreateRedisOptions {
  /** Called on every connection-level error (the client reconnects by itself). */
  onError?: (err: Error) => void;
}

export function createRedis(cfg: RedisConfig, options: CreateRedisOptions = {}): RedisClient {
  const common: RedisOptions = {
    connectTimeout: Math.max(cfg.commandTimeoutMs, 2000),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    lazyConnect: true,
    // No enableAutoPipelining: ioredis runs one auto-pipeline at a time, so while Redis stalls
    // each new batch waits for the previous one's timeout and "fail within about a second"
    // becomes N × commandTimeoutMs under load (measured: 10 concurrent calls 530 → 1016 ms),
    // for ~4% throughput (docs/benchmarks.md).
    retryStrategy: (times) => reconnectDelayMs(times),
    ...(cfg.password ? { password: cfg.password } : {}),
  };

  // TLS from the parsed scheme (isTlsNode), never from ioredis's reading of the string: it turns
  // TLS on only for a literal lowercase `rediss://` URL and for no cluster or sentinel node,
  // while the config (and its cleartext warning) reads `REDISS://` as TLS. Nodes all share one
  // scheme (schema.ts). The certificate is verified against Node's CAs and the host connected to.
  let client: RedisClient;
  if (cfg.cluster) {
    const tls = cfg.cluster.nodes.some(isTlsNode);
    const clusterOptions: ClusterOptions = {
      // A cluster's node clients come and go with its topology: ioredis's own per-command timer.
      // TLS for every node, those the cluster reports included.
      redisOptions: { ...common, commandTimeout: cfg.commandTimeoutMs, ...(tls ? { tls: verified() } : {}) },
      enableOfflineQueue: false,
      lazyConnect: true,
      slotsRefreshTimeout: Math.max(cfg.commandTimeoutMs, 2000),
      // A master that hangs (frozen, cut off) keeps its connections open and never answers
      // MOVED: without a periodic CLUSTER SLOTS its slots' commands went there (each timing out)
      // for as long as it hung, long after its replica was promoted.
      slotsRefreshInterval: SLOTS_REFRESH_MS,
      // A script on a slot being migrated whose keys are not all on one side answers TRYAGAIN
      // until the move is done; ioredis's default budget (16 redirections, two per retry) gave
      // up within about 0.6 s, and a logout answered 503. Retried for as long as a command may take.
      retryDelayOnTryAgain: TRY_AGAIN_MS,
      maxRedirections: 16 + 2 * Math.ceil(cfg.commandTimeoutMs / TRY_AGAIN_MS),
      clusterRetryStrategy: (times) => reconnectDelayMs(times),
    };
    client = new Cluster(cfg.cluster.nodes.map((node) => hostPort(node)), clusterOptions);
  } else if (cfg.sentinel) {
    // rediss:// sentinels: TLS to the sentinels and to the master they name.
    const tls = cfg.sentinel.nodes.some(isTlsNode);
    client = new Redis({
      ...common,
      ...(tls ? { sentinelTLS: verified(), tls: verified(), enableTLSForSentinelMode: true } : {}),
      sentinels: cfg.sentinel.nodes.map((node) => hostPort(node, SENTINEL_PORT)),
      name: cfg.sentinel.name,
      // A master that hangs or is cut off keeps its connections open: nothing would make this
      // client (nor the bus's subscriber, its duplicate) leave it after Sentinel promoted
      // another. ioredis subscribes to +switch-master on the sentinels and reconnects on it
      // (one more connection per client, to a sentinel); the subscriber's reconnect then
      // re-checks the sessions held (redis/pubsub.ts). A killed master needs none of this.
      failoverDetector: true,
      // ioredis asks the sentinels one at a time, the one it last used first. A sentinel that
      // hangs (its host frozen) accepts the connection and never answers: without a deadline
      // the question never returned, and the client never left it for the healthy two, through
      // a failover or at startup.
      sentinelCommandTimeout: cfg.commandTimeoutMs,
      ...(cfg.sentinel.password ? { sentinelPassword: cfg.sentinel.password } : {}),
    });
  } else {
    const url = cfg.url ?? 'redis://127.0.0.1:6379';
    client = new Redis(url, isTlsNode(url) ? { ...common, tls: tlsFor(url) } : common);
  }
  // Without a listener ioredis prints every reconnect error to stderr, bypassing redaction.
  client.on('error', (err: Error) => options.onError?.(err));
  if (client instanceof Redis) {
    withDeadlines(client, cfg.commandTimeoutMs);
    reviveAfterFailover(client);
  }
  return client;
}

/** Clients this process closes on purpose (closeRedis, disconnectRedis): never revived. */
const closing = new WeakSet<RedisClient>();
/** Each single-node client's command deadlines (redis/deadlines.ts), and their timeout. */
const deadlines = new WeakMap<RedisClient, CommandDeadlines & { timeoutMs: number }>();

function withDeadlines(client: Redis, timeoutMs: number): void {
  deadlines.set(client, { ...enforceCommandDeadlines(client, timeoutMs), timeoutMs });
}

function stopDeadlines(client: RedisClient): void {
  deadlines.get(client)?.stop();
}

/**
 * ioredis's failoverDetector can end a Sentinel client for good: a +switch-master that lands
 * while the client is asking the sentinels for the master (reconnecting after the old master
 * died) fails that attempt with "Connection is closed." and sets the client's status to `end`,
 * with no retry; the gateway then answers 503 and its subscriber hears nothing until restarted
 * (about one run in four of live-sessions-sentinel.test.ts). A client that was up once and
 * ends without our closing it is connected again; ioredis resubscribes a subscriber as after
 * any reconnect. Only Sentinel clients with the detector: elsewhere `end` means closed.
 */
function reviveAfterFailover(client: Redis): void {
  if (!client.options.failoverDetector) return;
  let wasReady = false;
  client.on('ready', () => (wasReady = true));
  client.on('end', () => {
    if (!wasReady || closing.has(client)) return;
    setTimeout(() => {
      if (client.status === 'end' && !closing.has(client)) client.connect().catch(() => undefined);
    }, 100).unref();
  });
}

/** The nodes writes go to: every master of a Cluster, or the one node (redis/eviction.ts). */
export function writtenNodes(client: RedisClient): RedisClient[] {
  return client instanceof Cluster ? client.nodes('master') : [client];
}

/** Whether `client` finds its master through Sentinel (redis/replica-acks.ts). */
export function isSentinelClient(client: RedisClient): boolean {
  return !(client instanceof Cluster) && client.options.sentinels !== undefined && client.options.sentinels !== null;
}

/** The command timeout a client's deadlines enforce, if any (redis/deadlines.ts). */
export function commandTimeoutOf(client: RedisClient): number | undefined {
  return deadlines.get(client)?.timeoutMs;
}

/** Ends a client at once (the bus's subscriber); a Sentinel client is not revived after it. */
export function disconnectRedis(client: RedisClient): void {
  closing.add(client);
  stopDeadlines(client);
  client.disconnect();
}

/**
 * Holds a client's socket writes until the event loop's check phase, so that the commands
 * issued by all the requests one poll phase serves leave in one writev, and their replies
 * mostly come back in one read. Unlike ioredis's auto-pipelining nothing waits for an earlier
 * batch: every command is written within the same loop turn and keeps its own deadline
 * (redis/deadlines.ts), so a stalled Redis still fails each call after one timeout.
 * Returns the function to call before sending a command; a no-op for Cluster (its commands go
 * to several sockets) and for clients without a socket (the demo's in-memory Redis).
 */
export function createWriteCoalescer(client: RedisClient): () => void {
  if (client instanceof Cluster) return () => undefined;
  let held: { uncork(): void } | undefined;
  const release = () => {
    const stream = held;
    held = undefined;
    stream?.uncork();
  };
  return function holdWrites() {
    if (held !== undefined) return;
    const stream = (client as Partial<Redis>).stream;
    if (!stream || typeof stream.cork !== 'function' || !stream.writable) return;
    stream.cork();
    held = stream;
    setImmediate(release);
  };
}

/** Connects (bounded) and pings; rejects with the connection error. */
export async function connectRedis(client: RedisClient, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([client.connect(), deadline]);
    await Promise.race([client.ping(), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

export async function pingRedis(client: RedisClient): Promise<boolean> {
  try {
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  }
}

export async function closeRedis(client: RedisClient): Promise<void> {
  closing.add(client);
  // quit() leaves failoverDetector's +switch-master subscriptions to the sentinels open (only
  // disconnect() ends them), which would keep a stopping process alive; and disconnect() after
  // quit() holds the process for its 2 s timeout. disconnect() alone still ends the socket
  // gracefully (a FIN after what was written): Redis answers what it got first.
  if (!(client instanceof Cluster) && client.options.failoverDetector) {
    stopDeadlines(client);
    client.disconnect();
    return;
  }
  try {
    // Still under its deadline: a stalled Redis fails the QUIT instead of holding the stop.
    await client.quit();
  } catch {
    client.disconnect();
  } finally {
    stopDeadlines(client);
  }
}

/**
 * A connection of its own with the same options, deadlines and revival: for pub/sub (a
 * subscribed connection can run no other command) and for WAIT (which blocks the connection it
 * is sent on). ioredis resubscribes by itself after a reconnect (autoResubscribe). On Cluster
 * it subscribes through one node to a plain channel: PUBLISH reaches every node of a cluster,
 * and every instance needs every event (any instance may hold any session's streams), so
 * sharded pub/sub would only make each instance subscribe to every shard.
 */
export function duplicateConnection(client: RedisClient): RedisClient {
  // Two calls: Redis and Cluster each have their own duplicate(), and the union has no common signature.
  if (client instanceof Cluster) return client.duplicate();
  const subscriber = client.duplicate();
  const timeoutMs = deadlines.get(client)?.timeoutMs;
  if (timeoutMs !== undefined) withDeadlines(subscriber, timeoutMs);
  reviveAfterFailover(subscriber);
  return subscriber;
}

/**
 * Which of `keys` exist, in pipelined batches (one round trip per batch). On Cluster the keys
 * of a batch live in different slots, which one pipeline cannot carry: the batch's commands
 * are sent together instead (ioredis routes each to its node).
 */
export async function existsMany(client: RedisClient, keys: readonly string[], batchSize = 500): Promise<boolean[]> {
  const found: boolean[] = [];
  for (let i = 0; i < keys.length; i += batchSize) {
    const batch = keys.slice(i, i + batchSize);
    if (client instanceof Cluster) {
      const counts = await Promise.all(batch.map((key) => client.exists(key)));
      for (const n of counts) found.push(n > 0);
      continue;
    }
    const replies = (await client.pipeline(batch.map((key) => ['exists', key])).exec()) ?? [];
    for (const [err, n] of replies) {
      if (err) throw err;
      found.push(Number(n) > 0);
    }
  }
  return found;
}
