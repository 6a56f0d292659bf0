/**
 * A real Redis Sentinel set for integration tests: a master, optionally one replica, and one
 * sentinel (redis-server --sentinel) watching them, with Sentinel's own timings short enough for
 * a failover to fit a test. The one copy of what sentinel.test.ts, sentinel-failover.test.ts and
 * live-sessions-sentinel.test.ts need; every admin call fails instead of retrying and every wait
 * is bounded.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { findFreePort, startRedisServer, type RedisServer } from './redis-server.js';
import { eventually, withTimeout } from './wait.js';

export interface RedisSentinelSet {
  /** The master name the sentinel monitors (`redis.sentinel.name`). */
  name: string;
  /** `127.0.0.1:<port>` of the sentinel (`redis.sentinel.nodes`). */
  nodes: string[];
  sentinelPort: number;
  master: RedisServer;
  /** Undefined when started with `replica: false`. */
  replica: RedisServer | undefined;
  /** The port the sentinel names as the master now (undefined if it does not answer). */
  masterPort(): Promise<number | undefined>;
  /** WAIT on `server` for one replica's acknowledgement of every write so far. */
  waitForReplica(server: RedisServer, timeoutMs?: number): Promise<void>;
  /** Starts one more replica of `of` (the current master) and waits until the sentinel knows it; closed with the set. */
  startReplica(of: RedisServer): Promise<RedisServer>;
  /** Waits (bounded) until the sentinel names `server` as the master. */
  waitForMaster(server: RedisServer, timeoutMs: number): Promise<void>;
  /** Kills the sentinel and both servers; idempotent. */
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

export async function startRedisSentinel(options: RedisSentinelOptions = {}): Promise<RedisSentinelSet> {
  const name = options.name ?? 'mymaster';
  const started: RedisServer[] = [];
  let sentinel: ChildProcess | undefined;
  let dir: string | undefined;
  let closing: Promise<void> | undefined;

  const close = (): Promise<void> =>
    (closing ??= (async () => {
      const running = sentinel;
      if (running && running.exitCode === null && running.signalCode === null) {
        const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
        running.kill('SIGKILL');
        await withTimeout(exited, 5_000, 'the sentinel to exit', { fallback: undefined });
      }
      await Promise.allSettled(started.map((s) => s.close()));
      if (dir) rmSync(dir, { recursive: true, force: true });
    })());

  try {
    const master = await startRedisServer();
    started.push(master);
    dir = mkdtempSync(path.join(tmpdir(), 'bff-sentinel-'));
    const sentinelPort = await findFreePort();
    const conf = path.join(dir, 'sentinel.conf');
    // Sentinel rewrites its own config file, so it gets a private, writable one.
    writeFileSync(
      conf,
      [
        `port ${sentinelPort}`,
        `bind ${HOST}`,
        `dir ${dir}`,
        `sentinel monitor ${name} ${HOST} ${master.port} 1`,
        `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1_000}`,
        `sentinel failover-timeout ${name} ${options.failoverTimeoutMs ?? 10_000}`,
        '',
      ].join('\n'),
    );
    const child = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
    sentinel = child;
    const exited = () => (child.exitCode !== null || child.signalCode !== null ? 'the sentinel exited' : undefined);

    const masterPort = async (): Promise<number | undefined> => {
      const addr = (await adminCall(sentinelPort, 'SENTINEL', 'get-master-addr-by-name', name)) as string[] | null;
      return addr?.[1] === undefined ? undefined : Number(addr[1]);
    };
    const waitForMaster = async (server: RedisServer, timeoutMs: number): Promise<void> => {
      await eventually(`sentinel naming :${server.port} the master`, timeoutMs, async () => (await masterPort()) === server.port, { intervalMs: 100, abort: exited });
    };
    await waitForMaster(master, SETUP_TIMEOUT_MS);

    /** A replica of `of`, in sync, that the sentinel knows and sees healthy (it can promote only such). */
    const startReplica = async (of: RedisServer): Promise<RedisServer> => {
      const replica = await startRedisServer({ extraArgs: ['--replicaof', HOST, String(of.port), ...(options.replicaArgs ?? [])] });
      started.push(replica);
      await eventually('the replica in sync', SETUP_TIMEOUT_MS, async () => /master_link_status:up/.test(String(await adminCall(replica.port, 'INFO', 'replication'))), { intervalMs: 100 });
      // Sentinel learns replicas from the master's INFO (every 10 s outside a failover).
      await eventually(
        `sentinel discovering the replica :${replica.port}`,
        SETUP_TIMEOUT_MS,
        async () => {
          const replicas = (await adminCall(sentinelPort, 'SENTINEL', 'replicas', name)) as string[][] | null;
          return (replicas ?? []).map(fields).some((info) => info.get('port') === String(replica.port) && info.get('flags') === 'slave' && info.get('master-link-status') === 'ok');
        },
        { intervalMs: 100, abort: exited },
      );
      return replica;
    };
    const replica = (options.replica ?? true) ? await startReplica(master) : undefined;

    return {
      name,
      nodes: [`${HOST}:${sentinelPort}`],
      sentinelPort,
      master,
      replica,
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
