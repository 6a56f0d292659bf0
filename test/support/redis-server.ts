// Real redis-server processes for integration tests: a fake store would hide exactly the
// failure modes (stalls, restarts, cluster redirections) the gateway must survive.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';

export interface RedisServer {
  url: string;
  host: string;
  port: number;
  /** SIGSTOP: the kernel still accepts connections, but nothing is ever answered. */
  pause(): void;
  /** SIGCONT: commands queued while paused are answered now. */
  resume(): void;
  /** Kills the server and waits for it to exit; the port is remembered for start(). */
  stop(): Promise<void>;
  /**
   * Starts again on the same port and waits until PING answers. Nothing is persisted, so
   * the data is gone: this is a crash-and-restart, not a failover.
   */
  start(): Promise<void>;
  /** Stops for good and removes the working directory; idempotent. */
  close(): Promise<void>;
  /** INFO commandstats as command name -> calls (subcommands look like `config|resetstat`). */
  commandStats(): Promise<Record<string, number>>;
  resetStats(): Promise<void>;
  keys(pattern?: string): Promise<string[]>;
  /** Every value of every matching key as text (hash field names included): for leak scans. */
  dumpValues(pattern?: string): Promise<string[]>;
}

export interface RedisCluster {
  nodes: string[];
  /** Every node's server (masters first as created; with `replicas`, their replicas after). */
  servers: RedisServer[];
  /** The master serving `key`'s slot now, and its replica (with `replicas`), as `from`'s node sees it. */
  ownerOf(key: string, from?: RedisServer): Promise<{ master: RedisServer; replica: RedisServer | undefined }>;
  /** Resolves once `server` is a master that serves `key`'s slot and reports the cluster ok. */
  promoted(server: RedisServer, key: string, ms: number): Promise<void>;
  /**
   * Moves `key`'s slot to the master `to` as redis-cli does (IMPORTING, MIGRATING, MIGRATE,
   * SETSLOT NODE), with half of its keys moved while `hold` runs (ASK and TRYAGAIN answers).
   */
  migrateHeld(key: string, to: RedisServer, hold: () => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 5_000;
const EXIT_TIMEOUT_MS = 5_000;
const CLUSTER_TIMEOUT_MS = 30_000;
const ADMIN_COMMAND_TIMEOUT_MS = 5_000;

export function redisUrlForTests(): string {
  const url = process.env.REDIS_URL || process.env.BFF_TEST_REDIS_URL;
  if (!url) {
    throw new Error(
      'No Redis for tests: set REDIS_URL, or run through the Jest integration/e2e projects whose ' +
        'global setup (test/support/global-setup.ts) starts redis-server and sets BFF_TEST_REDIS_URL.',
    );
  }
  return url;
}

export function redisServerAvailable(): boolean {
  const probe = spawnSync('redis-server', ['--version'], { stdio: 'ignore', timeout: 5_000 });
  return probe.error === undefined && probe.status === 0;
}

/**
 * Asks the kernel for a free port. Racy by nature (someone may take it before we bind), which
 * is why callers retry once when the server reports the address in use.
 */
export function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, HOST, () => {
      const addr = srv.address();
      srv.close(() => {
        if (addr && typeof addr === 'object') resolve(addr.port);
        else reject(new Error('could not determine a free port'));
      });
    });
  });
}

/**
 * One PING over a raw socket rather than ioredis: no reconnect logic, no offline queue, so a
 * refused or silent server simply yields false within the timeout.
 */
export function pingOnce(port: number, timeoutMs = 500, host = HOST): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let reply = '';
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('error', () => done(false));
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString('latin1');
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
    socket.once('connect', () => socket.write('PING\r\n'));
  });
}

async function waitUntil(
  what: string,
  timeoutMs: number,
  check: () => Promise<boolean>,
  abort?: () => string | undefined,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const aborted = abort?.();
    if (aborted) throw new Error(`${what}: ${aborted}`);
    if (await check()) return;
    if (Date.now() >= deadline) throw new Error(`${what}: not ready within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A short-lived connection that fails instead of retrying: admin calls must never hang a test. */
async function withAdminConnection<T>(port: number, fn: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    enableReadyCheck: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: ADMIN_COMMAND_TIMEOUT_MS,
    commandTimeout: ADMIN_COMMAND_TIMEOUT_MS,
    retryStrategy: () => null,
  });
  // Errors surface through the rejected command; without a listener ioredis would also log them.
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

function parseCommandStats(info: string): Record<string, number> {
  const stats: Record<string, number> = {};
  for (const line of info.split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):.*?\bcalls=(\d+)/.exec(line);
    if (m?.[1] !== undefined && m[2] !== undefined) stats[m[1]] = Number(m[2]);
  }
  return stats;
}

// The suite's one Redis dump (redis-dump.ts opens a connection by URL around it). It lives
// here because global-setup loads this file with Node's own loader, where a relative `.js`
// import of another TypeScript file would not resolve.

/** Every key matching `pattern`, sorted; SCAN may return a key more than once, a Set keeps it exact. */
export async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const seen = new Set<string>();
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    for (const k of batch) seen.add(k);
  } while (cursor !== '0');
  return [...seen].sort();
}

interface KeyContent {
  /** Every value, hash field names included. */
  values: string[];
  /** The key's content as one text (a hash as JSON). */
  text: string;
}

async function readKey(redis: Redis, key: string): Promise<KeyContent | undefined> {
  const type = await redis.type(key);
  const list = (values: string[]): KeyContent => ({ values, text: values.join(' ') });
  switch (type) {
    case 'string': {
      const v = await redis.get(key);
      return v === null ? undefined : { values: [v], text: v };
    }
    case 'hash': {
      const hash = await redis.hgetall(key);
      return { values: Object.entries(hash).flat(), text: JSON.stringify(hash) };
    }
    case 'set':
      return list(await redis.smembers(key));
    case 'list':
      return list(await redis.lrange(key, 0, -1));
    case 'zset':
      return list(await redis.zrange(key, 0, -1));
    case 'stream':
      return list((await redis.xrange(key, '-', '+')).flatMap(([, fields]) => fields));
    default:
      // 'none': the key expired between SCAN and TYPE.
      return undefined;
  }
}

export interface DumpOptions {
  /** 'lines' (default): one `<key> <content>` per key; 'values': every value, flat. */
  shape?: 'lines' | 'values';
}

/** The dump over an open connection (the caller owns it). */
export async function dumpWith(redis: Redis, pattern: string, options: DumpOptions = {}): Promise<string[]> {
  const out: string[] = [];
  for (const key of await scanKeys(redis, pattern)) {
    const content = await readKey(redis, key);
    if (!content) continue;
    if (options.shape === 'values') out.push(...content.values);
    else out.push(`${key} ${content.text}`);
  }
  return out;
}

interface ProcessSpec {
  port: number;
  dir: string;
  extraArgs: string[];
}

function redisArgs(spec: ProcessSpec): string[] {
  // Later arguments win in redis-server, so extraArgs can override any default here.
  return [
    '--port', String(spec.port),
    '--bind', HOST,
    '--save', '',
    '--appendonly', 'no',
    '--daemonize', 'no',
    '--dir', spec.dir,
    '--protected-mode', 'no',
    ...spec.extraArgs,
  ];
}

/** Owns one child process at a time; restarts reuse the same port and directory. */
class ManagedRedis implements RedisServer {
  readonly host = HOST;
  readonly url: string;
  private child: ChildProcess | undefined;
  private output = '';
  private exited: Promise<void> = Promise.resolve();
  private closing: Promise<void> | undefined;
  // process 'exit' handlers must be synchronous: SIGKILL is the only thing that still works.
  private readonly killOnExit = (): void => {
    this.child?.kill('SIGKILL');
    rmSync(this.spec.dir, { recursive: true, force: true });
  };

  private readonly spec: ProcessSpec;

  constructor(spec: ProcessSpec) {
    this.spec = spec;
    this.url = `redis://${HOST}:${spec.port}`;
    process.once('exit', this.killOnExit);
  }

  get port(): number {
    return this.spec.port;
  }

  async start(): Promise<void> {
    if (this.closing) throw new Error(`redis-server :${this.port} is closed`);
    if (this.child) throw new Error(`redis-server :${this.port} is already running`);
    this.output = '';
    const child = spawn('redis-server', redisArgs(this.spec), {
      cwd: this.spec.dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    let exitReason: string | undefined;
    this.exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        exitReason = `redis-server exited (code ${code}, signal ${signal}): ${this.output.trim().slice(-500)}`;
        if (this.child === child) this.child = undefined;
        resolve();
      });
      child.once('error', (err) => {
        exitReason = `cannot spawn redis-server: ${err.message}`;
        if (this.child === child) this.child = undefined;
        resolve();
      });
    });
    const keep = (chunk: Buffer): void => {
      // Only the tail matters, for error messages; the log must not grow without bound.
      this.output = (this.output + chunk.toString('utf8')).slice(-4000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    try {
      await waitUntil(
        `redis-server on port ${this.port}`,
        READY_TIMEOUT_MS,
        () => pingOnce(this.port),
        () => exitReason,
      );
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  pause(): void {
    this.running().kill('SIGSTOP');
  }

  resume(): void {
    this.running().kill('SIGCONT');
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    // SIGKILL also ends a SIGSTOPped process, and without persistence there is nothing to flush.
    child.kill('SIGKILL');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.exited,
      new Promise<void>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`redis-server pid ${child.pid} did not exit in ${EXIT_TIMEOUT_MS} ms`)),
          EXIT_TIMEOUT_MS,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      try {
        await this.stop();
      } finally {
        process.removeListener('exit', this.killOnExit);
        rmSync(this.spec.dir, { recursive: true, force: true });
      }
    })();
    return this.closing;
  }

  commandStats(): Promise<Record<string, number>> {
    return withAdminConnection(this.port, async (r) => parseCommandStats(await r.info('commandstats')));
  }

  async resetStats(): Promise<void> {
    await withAdminConnection(this.port, (r) => r.config('RESETSTAT'));
  }

  keys(pattern = '*'): Promise<string[]> {
    return withAdminConnection(this.port, (r) => scanKeys(r, pattern));
  }

  dumpValues(pattern = '*'): Promise<string[]> {
    return withAdminConnection(this.port, (r) => dumpWith(r, pattern, { shape: 'values' }));
  }

  private running(): ChildProcess {
    if (!this.child) throw new Error(`redis-server :${this.port} is not running`);
    return this.child;
  }
}

async function launch(
  port: number | undefined,
  extraArgs: (port: number, dir: string) => Promise<string[]>,
): Promise<ManagedRedis> {
  // A free port can be taken between discovery and bind: one retry covers that race.
  const attempts = port === undefined ? 2 : 1;
  let lastError: unknown;
  for (let i = 0; i < attempts; i++) {
    const p = port ?? (await findFreePort());
    const dir = mkdtempSync(path.join(os.tmpdir(), `bff-redis-${p}-`));
    const server = new ManagedRedis({ port: p, dir, extraArgs: await extraArgs(p, dir) });
    try {
      await server.start();
      return server;
    } catch (err) {
      lastError = err;
      await server.close();
    }
  }
  throw lastError;
}

export function startRedisServer(opts: { port?: number; extraArgs?: string[] } = {}): Promise<RedisServer> {
  return launch(opts.port, async () => opts.extraArgs ?? []);
}

function runRedisCli(args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('redis-cli', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (out += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`redis-cli ${args.join(' ')} failed (code ${code}, signal ${signal}):\n${out}`));
    });
  });
}

/**
 * A local cluster: masters only by default (enough for slot redirections and cross-slot
 * errors), or with a replica per master for failovers (`nodeTimeoutMs` then bounds how soon a
 * hung master's replica is promoted).
 */
export async function startRedisCluster(opts: { masters?: number; replicas?: boolean; nodeTimeoutMs?: number } = {}): Promise<RedisCluster> {
  const masters = opts.masters ?? 3;
  if (masters < 3) throw new Error('redis-cli --cluster create needs at least 3 masters');
  const total = opts.replicas ? masters * 2 : masters;
  const servers: ManagedRedis[] = [];
  const closeAll = async (): Promise<void> => {
    await Promise.allSettled(servers.map((s) => s.close()));
  };
  try {
    for (let i = 0; i < total; i++) {
      servers.push(
        await launch(undefined, async (port, dir) => [
          '--cluster-enabled', 'yes',
          '--cluster-config-file', path.join(dir, `nodes-${port}.conf`),
          // The default bus port (port + 10000) may be taken or beyond 65535 for an
          // ephemeral port, so it gets a free port of its own.
          '--cluster-port', String(await findFreePort()),
          '--cluster-node-timeout', String(opts.nodeTimeoutMs ?? 2000),
        ]),
      );
    }
    await runRedisCli(
      ['--cluster', 'create', ...servers.map((s) => `${HOST}:${s.port}`), '--cluster-replicas', opts.replicas ? '1' : '0', '--cluster-yes'],
      CLUSTER_TIMEOUT_MS,
    );
    // redis-cli returns once the slots are assigned; every node must also agree the cluster is
    // healthy, or the first commands of a test race gossip and get CLUSTERDOWN.
    await waitUntil('redis cluster', CLUSTER_TIMEOUT_MS, async () => {
      const infos = await Promise.all(
        servers.map((s) => withAdminConnection(s.port, (r) => r.cluster('INFO')).catch(() => '')),
      );
      return infos.every((info) => /cluster_state:ok/.test(info) && /cluster_known_nodes:(\d+)/.exec(info)?.[1] === String(total));
    });
    // Replicas take a moment to sync: a failover before that promotes an empty replica.
    if (opts.replicas) {
      await waitUntil('redis cluster replicas in sync', CLUSTER_TIMEOUT_MS, async () => {
        const roles = await Promise.all(servers.map((s) => withAdminConnection(s.port, (r) => r.info('replication')).catch(() => '')));
        return roles.filter((info) => /role:slave/.test(info) && /master_link_status:up/.test(info)).length === masters;
      });
    }
  } catch (err) {
    await closeAll();
    throw err;
  }
  let closing: Promise<void> | undefined;
  const byPort = (port: number) => servers.find((s) => s.port === port);
  /** CLUSTER NODES as (id, port, flags, master id, slot ranges). */
  const nodesOf = async (from: RedisServer) =>
    String(await withAdminConnection(from.port, (r) => r.cluster('NODES')))
      .trim()
      .split('\n')
      .map((line) => {
        const parts = line.split(' ');
        const ranges = parts.slice(8).filter((s) => !s.startsWith('[')).map((s) => s.split('-').map(Number));
        return { id: parts[0], port: Number(parts[1]?.split('@')[0]?.split(':')[1]), flags: parts[2] ?? '', master: parts[3], ranges };
      });
  const slotOf = async (key: string, from: RedisServer) => Number(await withAdminConnection(from.port, (r) => r.cluster('KEYSLOT', key)));
  async function ownerOf(key: string, from: RedisServer = servers[0] as RedisServer) {
    const slot = await slotOf(key, from);
    const nodes = await nodesOf(from);
    const owner = nodes.find((n) => n.flags.includes('master') && n.ranges.some(([a, b = a]) => slot >= (a as number) && slot <= (b as number)));
    if (!owner) throw new Error(`no master serves slot ${slot}`);
    const replica = nodes.find((n) => n.master === owner.id && !n.flags.includes('fail'));
    return { master: byPort(owner.port) as RedisServer, replica: replica && byPort(replica.port) };
  }
  return {
    nodes: servers.map((s) => s.url),
    servers,
    ownerOf,
    async promoted(server, key, ms) {
      await waitUntil(`node ${server.port} promoted`, ms, async () => {
        const info = String(await withAdminConnection(server.port, (r) => r.cluster('INFO')).catch(() => ''));
        if (!/cluster_state:ok/.test(info)) return false;
        return (await ownerOf(key, server).catch(() => undefined))?.master === server;
      });
    },
    async migrateHeld(key, to, hold) {
      const { master: from } = await ownerOf(key);
      const slot = await slotOf(key, from);
      const nodes = await nodesOf(from);
      const idOf = (s: RedisServer) => nodes.find((n) => n.port === s.port)?.id as string;
      const admin = (s: RedisServer, ...args: (string | number)[]) => withAdminConnection(s.port, (r) => r.call('CLUSTER', ...args.map(String)));
      await admin(to, 'SETSLOT', slot, 'IMPORTING', idOf(from));
      await admin(from, 'SETSLOT', slot, 'MIGRATING', idOf(to));
      const keysLeft = async () => (await admin(from, 'GETKEYSINSLOT', slot, 1000)) as string[];
      const move = async (keys: string[]) => {
        if (keys.length > 0) await withAdminConnection(from.port, (r) => r.call('MIGRATE', HOST, String(to.port), '', '0', '5000', 'REPLACE', 'KEYS', ...keys));
      };
      const first = await keysLeft();
      await move(first.slice(0, Math.ceil(first.length / 2)));
      await hold();
      for (let i = 0; i < 100; i++) {
        const left = await keysLeft();
        if (left.length === 0) break;
        await move(left);
      }
      // The documented order: the target, the source, then every other master.
      for (const s of [to, from, ...servers.filter((s) => s !== to && s !== from)]) await admin(s, 'SETSLOT', slot, 'NODE', idOf(to)).catch(() => undefined);
    },
    close: () => (closing ??= closeAll()),
  };
}
