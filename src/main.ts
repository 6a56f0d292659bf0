/**
 * The process edge: load config, build the runtime and app, listen, drain on SIGTERM.
 * With worker-ipc.ts (the IPC channel) and process-env.ts (its one check of the environment),
 * the only module that touches process.* (argv, env, signals, exit codes, stdio).
 */
import cluster from 'node:cluster';
import { existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { createApp } from './app.js';
import { ConfigError, loadConfigFile, type Config } from './config/load.js';
import { createRuntime, StartupError, type Runtime } from './runtime.js';
import { createMetricsApp } from './http/metrics-server.js';
import { createLogger } from './observability/logger.js';
import { startSupervisor, type Supervisor } from './supervisor.js';
import type { MetricsSource } from './observability/metrics.js';
import { answerPrimary, metricsFromPrimary } from './worker-ipc.js';
import { createGatewayServer } from './http/server-options.js';

export interface CliArgs {
  config?: string;
  check: boolean;
  help: boolean;
}

export function parseArgs(argv: readonly string[]): CliArgs | string {
  const args: CliArgs = { check: false, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--check') args.check = true;
    else if (arg === '--help' || arg === '-h') args.help = true;
    else if (arg === '--config' || arg === '-c') {
      const value = argv[++i];
      if (!value) return '--config needs a file name';
      args.config = value;
    } else if (arg.startsWith('--config=')) args.config = arg.slice('--config='.length);
    else return `unknown argument: ${arg}`;
  }
  return args;
}

/**
 * config/default.yaml of the working directory (a checkout, the image's /app), else the one this
 * package ships: an installed package's `npx bff-gateway` runs in the user's own project.
 */
function defaultConfigFile(): string {
  const local = 'config/default.yaml';
  return existsSync(local) ? local : fileURLToPath(new URL('../config/default.yaml', import.meta.url));
}

const USAGE = "usage: bff-gateway [--config FILE] [--check]\n  FILE defaults to $BFF_CONFIG, then config/default.yaml (here, else the package's own)\n";

export interface RunningGateway {
  url: string;
  /** Where /metrics is served when server.metricsPort is set. */
  metricsUrl?: string;
  runtime: Runtime;
  server: http.Server;
  /** Stops accepting, lets in-flight requests finish (bounded), closes everything. */
  shutdown(): Promise<void>;
}

export interface StartOptions {
  /** Where /metrics reads from (a cluster worker: the primary's sum over workers). */
  metricsSource?: MetricsSource;
  /** Listen on server.metricsPort (default true; a cluster's primary serves it instead). */
  serveMetricsPort?: boolean;
}

/** How long a CONNECT's 405 may take to reach a client that does not read it before its socket is cut. */
const CONNECT_FLUSH_MS = 5_000;

/**
 * Calls `stop` on the first SIGTERM or SIGINT only. Service managers signal the whole process
 * group (systemd's KillMode=control-group, `kill -TERM -<pgid>`, tini -g), so a cluster worker
 * gets SIGTERM from them and again from its primary: with `once`, the second took Node's
 * default action and cut the drain, every in-flight call and unsaved refresh with it.
 */
function onStopSignal(stop: (signal: string) => void, onRepeat: (signal: string) => void): void {
  let stopping = false;
  const heard = (signal: string) => {
    if (stopping) return onRepeat(signal);
    stopping = true;
    stop(signal);
  };
  process.on('SIGTERM', () => heard('SIGTERM'));
  process.on('SIGINT', () => heard('SIGINT'));
}

export async function startGateway(config: Config, runtime: Runtime, options: StartOptions = {}): Promise<RunningGateway> {
  const app = createApp(runtime, options.metricsSource ? { metricsSource: options.metricsSource } : {});
  const server = createGatewayServer(app);
  server.on('upgrade', app.handleUpgrade);
  // Node drops a CONNECT without an answer unless someone handles it: the gateway is no
  // forward proxy, so it says so. Node has taken its own 'error' listener off the socket it
  // hands over: a client's reset after the answer was an uncaught exception that ended the
  // process, every in-flight call of every session with it (two packets, no credentials).
  server.on('connect', (_req, socket: import('node:net').Socket) => {
    socket.on('error', () => socket.destroy());
    const bound = setTimeout(() => socket.destroy(), CONNECT_FLUSH_MS);
    bound.unref();
    socket.end('HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', () => {
      clearTimeout(bound);
      socket.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.server.port, config.server.host, () => resolve());
  });
  const metricsServer =
    config.server.metricsPort === undefined || options.serveMetricsPort === false
      ? undefined
      : http.createServer(createMetricsApp(options.metricsSource ?? runtime.metrics.source, runtime.logger));
  if (metricsServer) {
    try {
      await new Promise<void>((resolve, reject) => {
        metricsServer.once('error', reject);
        metricsServer.listen(config.server.metricsPort, config.server.host, () => resolve());
      });
    } catch (err) {
      server.close();
      throw err;
    }
  }

  const { port } = server.address() as AddressInfo;
  const metricsAddress = metricsServer?.address() as AddressInfo | undefined;
  let shuttingDown: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    ...(metricsAddress ? { metricsUrl: `http://127.0.0.1:${metricsAddress.port}` } : {}),
    runtime,
    server,
    shutdown() {
      shuttingDown ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        // Event streams never finish by themselves: end them now, so they reconnect elsewhere.
        app.drain();
        metricsServer?.close();
        server.closeIdleConnections();
        const deadline = new Promise<void>((resolve) => setTimeout(resolve, config.server.shutdownTimeoutSeconds * 1000).unref());
        await Promise.race([closed, deadline]);
        server.closeAllConnections();
        await runtime.close();
      })();
      return shuttingDown;
    },
  };
}

export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const args = parseArgs(argv);
  if (typeof args === 'string') {
    process.stderr.write(`${args}\n${USAGE}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const file = args.config ?? env.BFF_CONFIG ?? defaultConfigFile();
  let config: Config;
  try {
    config = loadConfigFile(file, { env });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`bff-gateway: invalid configuration in ${file}\n${err.problems.map((p) => `  ${p}\n`).join('')}`);
    return 1;
  }
  for (const warning of config.derived.warnings) process.stderr.write(`bff-gateway: warning: ${warning}\n`);
  if (args.check) {
    process.stdout.write(`bff-gateway: configuration ${file} is valid\n`);
    return 0;
  }

  const workers = config.server.workers === 'auto' ? availableParallelism() : config.server.workers;
  if (workers > 1 && cluster.isPrimary) return supervise(config, workers);
  const primary = cluster.isWorker ? answerPrimary() : undefined;

  let stopDev: (() => Promise<void>) | undefined;
  let banner: string[] = [];
  let runtime: Runtime;
  try {
    if (config.dev) {
      const { startDemo } = await import('./demo.js');
      const demo = await startDemo(config);
      stopDev = demo.stop;
      banner = demo.summary;
      runtime = await demo.createRuntime();
    } else {
      runtime = await createRuntime(config);
    }
  } catch (err) {
    await stopDev?.();
    if (!(err instanceof StartupError)) throw err;
    process.stderr.write(`bff-gateway: cannot start: ${err.message}\n`);
    return 1;
  }

  // A promise that rejects with no handler is a bug, but ending the process for it would sign
  // nobody out and still drop every request in flight: log it loudly and keep serving.
  process.on('unhandledRejection', (reason) => {
    runtime.logger.error({ event: 'unhandled_rejection', err: reason }, 'a promise rejected with no handler (a bug): the process keeps serving');
  });
  let startOptions: StartOptions = {};
  if (primary) {
    primary.share(runtime.metrics.registry);
    startOptions = { metricsSource: metricsFromPrimary(config.redis.commandTimeoutMs), serveMetricsPort: false };
  }
  let gateway: RunningGateway;
  try {
    gateway = await startGateway(config, runtime, startOptions);
  } catch (err) {
    // Nothing may keep a process that cannot serve alive (Redis retries, discovery, the demo).
    await runtime.close().catch(() => undefined);
    await stopDev?.();
    process.stderr.write(`bff-gateway: cannot start: ${describeListenError(err, config)}\n`);
    return 1;
  }
  runtime.logger.info({ event: 'listening', url: config.server.publicUrl, port: config.server.port }, `gateway listening on ${config.server.publicUrl}`);
  if (banner.length > 0) process.stdout.write(`\nbff-gateway demo is running:\n${banner.map((l) => `  ${l}\n`).join('')}\nOpen ${config.server.publicUrl} and sign in as alice / alice-password.\n\n`);
  return new Promise<number>((resolve) => {
    const stop = (signal: string) => {
      runtime.logger.info({ event: 'shutdown', signal }, 'draining');
      void gateway
        .shutdown()
        .then(() => stopDev?.())
        // A worker's IPC channel would keep it alive: let go of it once drained.
        .then(() => (cluster.isWorker ? process.disconnect() : undefined))
        .then(() => resolve(0), () => resolve(1));
    };
    onStopSignal(stop, (signal) => runtime.logger.info({ event: 'shutdown_signal_ignored', signal }, 'already draining'));
  });
}

/** The cluster primary: supervises the workers until SIGTERM or SIGINT, then drains them. */
async function supervise(config: Config, workers: number): Promise<number> {
  const logger = createLogger({ level: config.log.level });
  let supervisor: Supervisor;
  try {
    supervisor = await startSupervisor(config, workers, logger);
  } catch (err) {
    process.stderr.write(`bff-gateway: cannot start: ${describeListenError(err, config)}\n`);
    return 1;
  }
  return new Promise<number>((resolve) => {
    // A worker that cannot start at all (port taken, Redis unreachable) stops the whole cluster,
    // as it would stop a single process: restarting it in a loop would only hide the problem.
    void supervisor.failed.then((reason) => {
      process.stderr.write(`bff-gateway: cannot start: ${reason}\n`);
      void supervisor.stop().then(() => resolve(1));
    });
    const stop = (signal: string) => {
      logger.info({ event: 'shutdown', signal, workers }, 'draining every worker');
      supervisor.stop().then(
        () => {
          logger.flush();
          resolve(0);
        },
        () => resolve(1),
      );
    };
    onStopSignal(stop, (signal) => logger.info({ event: 'shutdown_signal_ignored', signal }, 'already draining every worker'));
  });
}

/** One line for a server that could not listen (no stack: it is a deployment problem). */
function describeListenError(err: unknown, config: Config): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const where = (port: number | undefined) => `${config.server.host}:${port ?? '?'}`;
  const port = (err as { port?: number } | undefined)?.port;
  if (code === 'EADDRINUSE') return `${where(port)} is already in use`;
  if (code === 'EACCES') return `no permission to listen on ${where(port)}`;
  if (code === 'EADDRNOTAVAIL') return `${config.server.host} is not an address of this machine`;
  return err instanceof Error ? err.message : String(err);
}
