/**
 * A real Redis Sentinel set for integration tests: a master, optionally one replica, and one or
 * more sentinels (redis-server --sentinel) watching them, with Sentinel's own timings short
 * enough for a failover to fit a test. A sentinel can be paused (SIGSTOP: its port accepts,
 * nothing answers) or killed. Every admin call fails instead of retrying and every wait is
 * bounded.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { findFreePort, startRedisServer, type RedisServer } from './redis-server.js';
import { startTcpGate, type TcpGate } from './tcp-gate.js';
import { eventually, withTimeout } from './wait.js';

export interface SentinelProcess {
  port: number;
  /** SIGSTOP: a host that hangs with its sentinel. */
  pause(): void;
  resume(): void;
  kill(): Promise<void>;
}

export interface RedisSentinelSet {
  /** The master name the sentinels monitor (`redis.sentinel.name`). */
  name: string;
  /** `127.0.0.1:<port>` of each sentinel (`redis.sentinel.nodes`). */
  nodes: string[];
  /** The first sentinel's port. */
  sentinelPort: number;
  sentinels: SentinelProcess[];
  master: RedisServer;
  /** Undefined when started with `replica: false`. */
  replica: RedisServer | undefined;
  /** With `gatedReplication`: what the replica replicates through (shut() stops replication, nothing else). */
  replicationGate: TcpGate | undefined;
  /** The port the first sentinel that answers names as the master now (undefined if none does). */
  masterPort(): Promise<number | undefined>;
  /** WAIT on `server` for one replica's acknowledgement of every write so far. */
  waitForReplica(server: RedisServer, timeoutMs?: number): Promise<void>;
  /** Starts one more replica of `of` (the current master) and waits until the sentinel knows it; closed with the set. */
  startReplica(of: RedisServer): Promise<RedisServer>;
  /** Waits (bounded) until every sentinel that answers names `server` as the master. */
  waitForMaster(server: RedisServer, timeoutMs: number): Promise<void>;
  /** Kills the sentinels and the servers; idempotent. */
  close(): Promise<void>;
}

export interface RedisSentinelOptions {
  /** Start a replica of the master the sentinel knows (default true): needed for a failover. */
  replica?: boolean;
  /** More redis-server arguments for the replica (e.g. `--replica-read-only no`). */
  replicaArgs?: string[];
  name?: string;
  /** Sentinel's down-after-milliseconds (default 1 s). */
  downAfterMs?: number;
  /** Sentinel's failover-timeout (default 10 s). */
  failoverTimeoutMs?: number;
  /** How many sentinels (default 1); the quorum is a majority of them. */
  sentinels?: number;
  /** The replica replicates through a TCP gate (`replicationGate`): writes still unsent when a master dies. */
  gatedReplication?: boolean;
}

const HOST = '127.0.0.1';
const SETUP_TIMEOUT_MS = 20_000;

/** One command on a short-lived connection that fails instead of retrying; null on any error. */
export async function adminCall(port: number, ...args: string[]): Promise<unknown> {
  const client = new Redis({ host: HOST, port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, commandTimeout: 3_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await client.call(args[0] as string, ...args.slice(1));
  } catch {
    return null;
  } finally {
    client.disconnect();
  }
}

function fields(list: string[]): Map<string, string> {
  const info = new Map<string, string>();
  for (let i = 0; i + 1 < list.length; i += 2) info.set(list[i] as string, list[i + 1] as string);
  return info;
}

function spawnSentinel(dir: string, index: number, port: number, name: string, masterPort: number, quorum: number, options: RedisSentinelOptions): { process: SentinelProcess; child: ChildProcess } {
  const conf = path.join(dir, `sentinel-${index}.conf`);
  // Sentinel rewrites its own config file, so each gets a private, writable one.
  writeFileSync(
    conf,
    [
      `port ${port}`,
      `bind ${HOST}`,
      `dir ${dir}`,
      `sentinel monitor ${name} ${HOST} ${masterPort} ${quorum}`,
      `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1_000}`,
      `sentinel failover-timeout ${name} ${options.failoverTimeoutMs ?? 10_000}`,
      '',
    ].join('\n'),
  );
  const child = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
  const running = () => child.exitCode === null && child.signalCode === null;
  return {
    child,
    process: {
      port,
      pause: () => void child.kill('SIGSTOP'),
      resume: () => void child.kill('SIGCONT'),
      async kill() {
        if (!running()) return;
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGCONT');
        child.kill('SIGKILL');
        await withTimeout(exited, 5_000, 'the sentinel to exit', { fallback: undefined });
      },
    },
  };
}

export async function startRedisSentinel(options: RedisSentinelOptions = {}): Promise<RedisSentinelSet> {
  const name = options.name ?? 'mymaster';
  const started: RedisServer[] = [];
  const sentinels: { process: SentinelProcess; child: ChildProcess }[] = [];
  let gate: TcpGate | undefined;
  let dir: string | undefined;
  let closing: Promise<void> | undefined;

  const close = (): Promise<void> =>
    (closing ??= (async () => {
      await Promise.allSettled(sentinels.map((s) => s.process.kill()));
      await gate?.close();
      await Promise.allSettled(started.map((s) => s.close()));
      if (dir) rmSync(dir, { recursive: true, force: true });
    })());

  try {
    const master = await startRedisServer();
    started.push(master);
    dir = mkdtempSync(path.join(tmpdir(), 'bff-sentinel-'));
    const count = options.sentinels ?? 1;
    const quorum = Math.floor(count / 2) + 1;
    for (let i = 0; i < count; i += 1) sentinels.push(spawnSentinel(dir, i, await findFreePort(), name, master.port, quorum, options));
    const live = () => sentinels.filter((s) => s.child.exitCode === null && s.child.signalCode === null);
    const exited = () => (live().length === 0 ? 'every sentinel exited' : undefined);
    const named = async (port: number): Promise<number | undefined> => {
      const addr = (await adminCall(port, 'SENTINEL', 'get-master-addr-by-name', name)) as string[] | null;
      return addr?.[1] === undefined ? undefined : Number(addr[1]);
    };

    const masterPort = async (): Promise<number | undefined> => {
      for (const s of live()) {
        const port = await named(s.process.port);
        if (port !== undefined) return port;
      }
      return undefined;
    };
    const waitForMaster = async (server: RedisServer, timeoutMs: number): Promise<void> => {
      await eventually(
        `the sentinels naming :${server.port} the master`,
        timeoutMs,
        async () => {
          const answers = (await Promise.all(live().map((s) => named(s.process.port)))).filter((port) => port !== undefined);
          return answers.length > 0 && answers.every((port) => port === server.port);
        },
        { intervalMs: 100, abort: exited },
      );
    };
    await waitForMaster(master, SETUP_TIMEOUT_MS);
    if (count > 1) {
      // A failover needs a quorum that knows one another.
      await eventually(
        'the sentinels knowing one another',
        SETUP_TIMEOUT_MS,
        async () => {
          for (const s of live()) {
            const info = (await adminCall(s.process.port, 'SENTINEL', 'master', name)) as string[] | null;
            if (Number(fields(info ?? []).get('num-other-sentinels')) < count - 1) return false;
          }
          return true;
        },
        { intervalMs: 200, abort: exited },
      );
    }

    /** A replica of `of`, in sync, that every sentinel knows and sees healthy (they promote only such). */
    const startReplica = async (of: RedisServer, throughPort = of.port): Promise<RedisServer> => {
      const replica = await startRedisServer({ extraArgs: ['--replicaof', HOST, String(throughPort), ...(options.replicaArgs ?? [])] });
      started.push(replica);
      await eventually('the replica in sync', SETUP_TIMEOUT_MS, async () => /master_link_status:up/.test(String(await adminCall(replica.port, 'INFO', 'replication'))), { intervalMs: 100 });
      // Sentinel learns replicas from the master's INFO (every 10 s outside a failover).
      await eventually(
        `the sentinels discovering the replica :${replica.port}`,
        SETUP_TIMEOUT_MS,
        async () => {
          for (const s of live()) {
            const replicas = (await adminCall(s.process.port, 'SENTINEL', 'replicas', name)) as string[][] | null;
            const known = (replicas ?? []).map(fields).some((info) => info.get('port') === String(replica.port) && info.get('flags') === 'slave' && info.get('master-link-status') === 'ok');
            if (!known) return false;
          }
          return true;
        },
        { intervalMs: 100, abort: exited },
      );
      return replica;
    };
    if (options.gatedReplication) gate = await startTcpGate(master.url);
    const replica = (options.replica ?? true) ? await startReplica(master, gate ? Number(new URL(gate.url).port) : master.port) : undefined;

    return {
      name,
      nodes: sentinels.map((s) => `${HOST}:${s.process.port}`),
      sentinelPort: (sentinels[0] as { process: SentinelProcess }).process.port,
      sentinels: sentinels.map((s) => s.process),
      master,
      replica,
      replicationGate: gate,
      masterPort,
      waitForMaster,
      startReplica,
      async waitForReplica(server, timeoutMs = 5_000) {
        const acked = Number(await adminCall(server.port, 'WAIT', '1', String(timeoutMs)));
        if (!(acked >= 1)) throw new Error(`no replica acknowledged the writes on :${server.port} within ${timeoutMs} ms`);
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
