/**
 * The embedded demo (SPEC §1) on free ports, in-process: `config/default.yaml` loaded exactly
 * as `npm start` loads it (only the ports, Redis URL and log level come from the environment),
 * then started the way main.ts starts it: startDemo → demo.createRuntime → startGateway.
 *
 * Two test-only departures, both outside the config file:
 *   - `redis.keyPrefix` gets a random suffix (`bff-demo-<hex>:`), so concurrent test files and
 *     repeated runs never share sessions or login rate-limit counters in the shared Redis;
 *   - with `clock`, the runtime is built with that clock (createRuntime(config, { logger,
 *     clock })) instead of demo.createRuntime(): tests can then make the gateway see its access
 *     token as expired without waiting for it.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfigFile, type Config } from '../../src/config/load.js';
import { startDemo } from '../../src/demo.js';
import { startGateway, type RunningGateway } from '../../src/main.js';
import { createRuntime } from '../../src/runtime.js';
import { findFreePort, redisUrlForTests } from './redis-server.js';
import { withTimeout } from './wait.js';

export const DEFAULT_CONFIG_FILE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../config/default.yaml');

export interface RunningDemo {
  /** The gateway's public URL (http://localhost:PORT): the origin the SPA and cookies live on. */
  url: string;
  /** The dev OpenID provider's issuer (http://localhost:DEV_IDP_PORT). */
  idpUrl: string;
  /** The demo API (http://localhost:DEV_API_PORT). */
  apiUrl: string;
  config: Config;
  gateway: RunningGateway;
  stop(): Promise<void>;
}

export interface DemoOptions {
  /** The gateway's clock (token expiry, session timeouts); default Date.now. */
  clock?: () => number;
  /** Default 'warn'. */
  logLevel?: string;
  /** Bound on waiting for the gateway to load the provider's metadata; default 10 s. */
  readyTimeoutMs?: number;
}

function isAddressInUse(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === 'EADDRINUSE';
}

async function startOnce(options: DemoOptions): Promise<RunningDemo> {
  const [port, idpPort, apiPort] = await Promise.all([findFreePort(), findFreePort(), findFreePort()]);
  if (new Set([port, idpPort, apiPort]).size !== 3) {
    throw Object.assign(new Error('the kernel handed out the same port twice'), { code: 'EADDRINUSE' });
  }
  const env = {
    PORT: String(port),
    DEV_IDP_PORT: String(idpPort),
    DEV_API_PORT: String(apiPort),
    REDIS_URL: redisUrlForTests(),
    LOG_LEVEL: options.logLevel ?? 'warn',
  };
  const loaded = loadConfigFile(DEFAULT_CONFIG_FILE, { env });
  // The loaded config is frozen: a shallow copy with a new redis section, never a mutation.
  const config: Config = { ...loaded, redis: { ...loaded.redis, keyPrefix: `bff-demo-${randomBytes(6).toString('hex')}:` } };

  const demo = await startDemo(config);
  let gateway: RunningGateway | undefined;
  try {
    const runtime = options.clock
      ? await createRuntime(config, { logger: demo.logger, clock: options.clock })
      : await demo.createRuntime();
    try {
      gateway = await startGateway(config, runtime);
    } catch (err) {
      await runtime.close();
      throw err;
    }
    await withTimeout(runtime.provider.ready(), options.readyTimeoutMs ?? 10_000, 'the gateway loading the provider metadata');
  } catch (err) {
    await gateway?.shutdown();
    await demo.stop();
    throw err;
  }

  const running = gateway;
  let stopping: Promise<void> | undefined;
  return {
    url: config.server.publicUrl,
    idpUrl: config.oidc.issuer,
    apiUrl: `http://localhost:${apiPort}`,
    config,
    gateway: running,
    stop() {
      stopping ??= (async () => {
        try {
          await withTimeout(running.shutdown(), 15_000, 'gateway shutdown');
        } finally {
          await withTimeout(demo.stop(), 5_000, 'demo provider and API shutdown');
        }
      })();
      return stopping;
    },
  };
}

/**
 * Starts the demo on three free ports. A port can be taken between discovery and bind, so an
 * EADDRINUSE is retried once with fresh ports.
 */
export async function startDemoOnFreePorts(options: DemoOptions = {}): Promise<RunningDemo> {
  try {
    return await startOnce(options);
  } catch (err) {
    if (!isAddressInUse(err)) throw err;
    return startOnce(options);
  }
}
