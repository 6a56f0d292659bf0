/**
 * The gateway under test, built through its public programmatic API (src/index.ts: parseConfig,
 * createRuntime, startGateway) with a production-like config: log level info, default process
 * metrics on, an `auth: user` route `/api` (Bearer) to the echo upstream and, with `dpopRoute`,
 * a second one `/dpop` (`dpop: true`, bench/dpop-route.ts) to the same upstream.
 *
 * Command `advanceClock` moves the gateway's clock forward (the refresh storm: every access
 * token looks expired without anyone waiting); profiling is in every child (lib/ipc.ts).
 */
import { createRuntime, parseConfig, startGateway } from '../../src/index.js';
import { connectRedis, createRedis } from '../../src/redis/client.js';
import { DPOP_ROUTE_PATH } from '../dpop-route.js';
import { benchGatewayConfig, type BenchGatewayInput } from '../lib/gateway-config.js';
import { childOptions, guardChild, serveChild } from '../lib/ipc.js';

export interface GatewayOptions extends BenchGatewayInput {
  port: number;
  /**
   * Experiment (`--experiment autopipelining`): the gateway's own Redis client (createRedis from
   * src/redis/client.ts, same options) with ioredis auto-pipelining switched on, handed to
   * createRuntime as a ready client. Measures a suggested src/ change without making it.
   */
  autoPipelining?: boolean;
  /**
   * Adds the `/dpop` route. With one DPoP route every session is DPoP-bound (binding is per
   * session), so `/api` then sends the bound token as Bearer, without a proof.
   */
  dpopRoute?: boolean;
  /** rateLimit.loginPerMinute (the sign-in section signs in far more often than 60 a minute). */
  loginPerMinute?: number;
}

guardChild(async () => {
  const opts = childOptions<GatewayOptions>();
  const publicUrl = `http://${opts.host}:${opts.port}`;
  const base = benchGatewayConfig(opts, { port: opts.port, publicUrl });
  const config = parseConfig(
    {
      ...base,
      routes: [...base.routes, ...(opts.dpopRoute ? [{ path: DPOP_ROUTE_PATH, target: opts.upstream, auth: 'user', dpop: true }] : [])],
      ...(opts.loginPerMinute ? { rateLimit: { loginPerMinute: opts.loginPerMinute } } : {}),
    },
    { env: {} },
  );
  let offsetMs = 0;
  let redis: ReturnType<typeof createRedis> | undefined;
  if (opts.autoPipelining) {
    redis = createRedis(config.redis);
    redis.options.enableAutoPipelining = true;
    await connectRedis(redis, 5000);
  }
  const runtime = await createRuntime(config, { clock: () => Date.now() + offsetMs, ...(redis ? { redis } : {}) });
  await runtime.provider.ready();
  const gateway = await startGateway(config, runtime);

  serveChild(
    { url: publicUrl, cookieName: config.derived.sessionCookieName },
    {
      advanceClock(seconds: number) {
        offsetMs += seconds * 1000;
        return offsetMs;
      },
    },
    () => gateway.shutdown(),
  );
});
