/**
 * The bench's process plumbing. Every server and the load generator runs in a child process
 * of its own (2 cores: the load generator must not share an event loop with what it loads);
 * the orchestrator talks to them over the IPC channel with a tiny request/response protocol:
 *
 *   child  → parent  { type: 'ready', info }                  once, when listening
 *   parent → child   { type: 'call', id, cmd, args }
 *   child  → parent  { type: 'reply', id, ok, result | error }
 *
 * Every wait has a deadline, and every child is SIGKILLed when the orchestrator exits (also
 * on error or Ctrl-C); a child whose parent vanished exits by itself (IPC disconnect).
 */
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { appendFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { GCProfiler, type GCProfilerResult } from 'node:v8';

export type Handler = (args: any) => unknown;

interface CallMessage {
  type: 'call';
  id: number;
  cmd: string;
  args: unknown;
}

interface ReplyMessage {
  type: 'reply';
  id: number;
  ok: boolean;
  result?: unknown;
  error?: string;
}

interface ReadyMessage {
  type: 'ready';
  info: unknown;
}

// ---------------------------------------------------------------------------------------------
// Child side
// ---------------------------------------------------------------------------------------------

type HeapSpaces = GCProfilerResult['statistics'][number]['afterGC']['heapSpaceStatistics'];

/** Used bytes of every space but the young generation's (and the read-only one). */
function oldGenerationUsed(spaces: HeapSpaces): number {
  let used = 0;
  for (const space of spaces) if (!space.spaceName.startsWith('new_') && space.spaceName !== 'read_only_space') used += space.spaceUsedSize;
  return used;
}

/**
 * GC during a profile: pauses (count, total and longest in ms, major collections), and the
 * growth of the old generation across each scavenge, summed: what scavenges promoted.
 */
function summarizeGc(profile: GCProfilerResult) {
  let totalUs = 0;
  let maxUs = 0;
  let major = 0;
  let promotedBytes = 0;
  for (const s of profile.statistics) {
    totalUs += s.cost;
    maxUs = Math.max(maxUs, s.cost);
    if (s.gcType === 'MarkSweepCompact') major += 1;
    if (s.gcType === 'Scavenge') {
      promotedBytes += Math.max(0, oldGenerationUsed(s.afterGC.heapSpaceStatistics) - oldGenerationUsed(s.beforeGC.heapSpaceStatistics));
    }
  }
  const ms = (us: number) => Math.round(us / 10) / 100;
  return { count: profile.statistics.length, totalMs: ms(totalUs), maxMs: ms(maxUs), major, promotedBytes };
}

/** The JSON options the parent passed (in the environment: they hold client secrets, which `ps` would show in argv). */
export function childOptions<T>(): T {
  const raw = process.env.BENCH_CHILD_OPTIONS;
  if (!raw) throw new Error('bench child started without options');
  return JSON.parse(raw) as T;
}

/**
 * Announces readiness and serves commands. Always available: `shutdown` runs the optional
 * cleanup and exits 0; `profileStart` / `profileStop` record a CPU profile of this process with
 * the inspector's Profiler domain (in-process: only the loaded window is recorded, not startup).
 */
export function serveChild(info: unknown, handlers: Record<string, Handler>, cleanup?: () => Promise<void> | void): void {
  const send = (m: ReadyMessage | ReplyMessage) => process.send?.(m);
  let profiler: Session | undefined;
  // GC since the last gcStats call: a run's tail latency is often a collector's doing.
  let gcProfiler = new GCProfiler();
  gcProfiler.start();
  const all: Record<string, Handler> = {
    /** GC since the previous call (see summarizeGc). */
    gcStats() {
      const profile = gcProfiler.stop();
      gcProfiler = new GCProfiler();
      gcProfiler.start();
      return summarizeGc(profile);
    },
    async profileStart(args: { samplingIntervalUs: number }) {
      profiler = new Session();
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.setSamplingInterval', { interval: args.samplingIntervalUs });
      await profiler.post('Profiler.start');
      return true;
    },
    async profileStop(args: { file: string }) {
      if (!profiler) throw new Error('profiler not started');
      const { profile } = await profiler.post('Profiler.stop');
      profiler.disconnect();
      profiler = undefined;
      writeFileSync(args.file, JSON.stringify(profile));
      return args.file;
    },
    /** Sampling heap profile: every allocation (also those collected since), to find who allocates. */
    async heapSampleStart(args: { intervalBytes: number; live?: boolean; promoted?: boolean }) {
      profiler = new Session();
      profiler.connect();
      await profiler.post('HeapProfiler.enable');
      await profiler.post('HeapProfiler.startSampling', {
        samplingInterval: args.intervalBytes,
        // promoted: what survived the young generation (what the old generation has to collect).
        includeObjectsCollectedByMajorGC: !args.live,
        includeObjectsCollectedByMinorGC: !args.live && !args.promoted,
      });
      return true;
    },
    async heapSampleStop(args: { file: string }) {
      if (!profiler) throw new Error('heap sampling not started');
      const { profile } = await profiler.post('HeapProfiler.stopSampling');
      profiler.disconnect();
      profiler = undefined;
      writeFileSync(args.file, JSON.stringify(profile));
      return args.file;
    },
    /** Heap and RSS in MB, for leak and GC-pressure checks between runs. */
    memory() {
      const m = process.memoryUsage();
      return { rssMB: Math.round(m.rss / 2 ** 20), heapUsedMB: Math.round(m.heapUsed / 2 ** 20), heapTotalMB: Math.round(m.heapTotal / 2 ** 20) };
    },
    ...handlers,
    async shutdown() {
      await cleanup?.();
      setImmediate(() => process.exit(0));
      return true;
    },
  };
  process.on('message', (m: CallMessage) => {
    if (m?.type !== 'call') return;
    const handler = all[m.cmd];
    if (!handler) {
      send({ type: 'reply', id: m.id, ok: false, error: `unknown command ${m.cmd}` });
      return;
    }
    Promise.resolve()
      .then(() => handler(m.args))
      .then(
        (result) => send({ type: 'reply', id: m.id, ok: true, result }),
        (err: unknown) => send({ type: 'reply', id: m.id, ok: false, error: err instanceof Error ? err.stack ?? err.message : String(err) }),
      );
  });
  send({ type: 'ready', info });
}

/** Exit when the orchestrator is gone, and report startup failures to it before dying. */
export function guardChild(main: () => Promise<void>): void {
  process.on('disconnect', () => process.exit(0));
  main().catch((err: unknown) => {
    process.stderr.write(`bench child failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}

// ---------------------------------------------------------------------------------------------
// Parent side
// ---------------------------------------------------------------------------------------------

export interface BenchChild<Info = unknown> {
  name: string;
  pid: number;
  info: Info;
  call<T = unknown>(cmd: string, args?: unknown, timeoutMs?: number): Promise<T>;
  /** Asks for a clean exit, then SIGKILLs after the deadline. */
  stop(timeoutMs?: number): Promise<void>;
  kill(): void;
  /** The last few KB of the child's stdout/stderr, for error messages. */
  output(): string;
}

const children = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of children) child.kill('SIGKILL');
  });
}

/** SIGKILLs every child still alive (synchronous: usable from signal and exit handlers). */
export function killAllChildren(): void {
  for (const child of children) child.kill('SIGKILL');
}

export interface StartChildOptions {
  name: string;
  /** Absolute path of the compiled module. */
  module: string;
  options: unknown;
  execArgv?: string[];
  /**
   * Runs the child under another executable (e.g. valgrind, with node and its flags in
   * execArgv): fork() then starts `execPath ...execArgv module`, the IPC channel unchanged.
   */
  execPath?: string;
  env?: NodeJS.ProcessEnv;
  readyTimeoutMs?: number;
}

export function startChild<Info>(opts: StartChildOptions): Promise<BenchChild<Info>> {
  installExitHook();
  const child = fork(opts.module, [], {
    execArgv: opts.execArgv ?? [],
    ...(opts.execPath ? { execPath: opts.execPath } : {}),
    env: { ...process.env, ...opts.env, BENCH_CHILD_OPTIONS: JSON.stringify(opts.options) },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    serialization: 'advanced',
  });
  children.add(child);
  let tail = '';
  // BENCH_LOG_DIR keeps every child's whole output (e.g. with --trace-gc in BENCH_GATEWAY_NODE_ARGS).
  const logFile = process.env.BENCH_LOG_DIR ? path.join(process.env.BENCH_LOG_DIR, `${opts.name}.log`) : undefined;
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-4000);
    if (logFile) appendFileSync(logFile, chunk);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);

  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  let exited: string | undefined;
  const exitPromise = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exited = `${opts.name} exited (code ${code}, signal ${signal})`;
      children.delete(child);
      for (const p of pending.values()) {
        clearTimeout(p.timer);
        p.reject(new Error(`${exited}\n${tail.trim()}`));
      }
      pending.clear();
      resolve();
    });
  });
  child.on('message', (m: ReplyMessage) => {
    if (m?.type !== 'reply') return;
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    clearTimeout(p.timer);
    if (m.ok) p.resolve(m.result);
    else p.reject(new Error(`${opts.name}: ${m.error}`));
  });

  const handle = (info: Info): BenchChild<Info> => ({
    name: opts.name,
    pid: child.pid ?? -1,
    info,
    call<T>(cmd: string, args?: unknown, timeoutMs = 30_000): Promise<T> {
      if (exited) return Promise.reject(new Error(exited));
      const id = nextId++;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`${opts.name}: '${cmd}' did not answer within ${timeoutMs} ms`));
        }, timeoutMs);
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
        child.send({ type: 'call', id, cmd, args } satisfies CallMessage);
      });
    },
    async stop(timeoutMs = 10_000) {
      if (exited) return;
      await this.call('shutdown', undefined, timeoutMs).catch(() => undefined);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      await exitPromise;
      clearTimeout(timer);
    },
    kill() {
      child.kill('SIGKILL');
    },
    output: () => tail,
  });

  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${opts.name} not ready within ${opts.readyTimeoutMs ?? 30_000} ms\n${tail.trim()}`));
    }, opts.readyTimeoutMs ?? 30_000);
    child.on('message', (m: ReadyMessage) => {
      if (m?.type !== 'ready') return;
      clearTimeout(timer);
      resolve(handle(m.info as Info));
    });
    void exitPromise.then(() => {
      clearTimeout(timer);
      reject(new Error(`${exited} before it was ready\n${tail.trim()}`));
    });
  });
}
