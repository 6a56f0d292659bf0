/**
 * The embedded demo (SPEC §1): with a config that has a `dev:` section, one process runs the
 * dev OpenID provider, the demo API and the gateway. The provider's client registration is
 * derived from the gateway's own config, so the two can never disagree.
 */
import type { Config } from './config/load.js';
import { createDemoApi } from './dev/demo-api.js';
import { createDevIdp, devTtlFromEnv } from './dev/idp.js';
import { createLogger, type Logger } from './observability/logger.js';
import { createMemoryRedis } from './redis/memory.js';
import { createRuntime, StartupError, type Runtime } from './runtime.js';

export interface Demo {
  logger: Logger;
  createRuntime(): Promise<Runtime>;
  stop(): Promise<void>;
  /** What runs where, for the startup banner. */
  summary: string[];
}

/** The demo API's resource indicator: tokens for it are JWTs with this audience. */
export const demoApiAudience = (config: Config) => `http://localhost:${config.dev?.api.port ?? 4001}`;

/** The audience of the demo's token-exchange route (RFC 8693): the demo API's "ledger". */
export const demoLedgerAudience = (config: Config) => `${demoApiAudience(config)}/ledger`;

export async function startDemo(config: Config, options: { logger?: Logger } = {}): Promise<Demo> {
  const dev = config.dev;
  if (!dev) throw new StartupError('the demo needs a dev: section');
  const logger = options.logger ?? createLogger({ level: config.log.level });
  const host = config.server.host;
  const audience = demoApiAudience(config);
  const ledgerAudience = demoLedgerAudience(config);
  const { derived, server, oidc } = config;

  const idp = await createDevIdp({
    issuer: oidc.issuer,
    clients: [
      {
        client_id: oidc.clientId,
        client_secret: oidc.clientSecret ?? '',
        client_name: 'bff-gateway demo SPA',
        redirect_uris: [derived.redirectUri],
        post_logout_redirect_uris: [derived.postLogoutRedirectUri],
        backchannel_logout_uri: `${derived.publicOrigin}${server.authPath}/backchannel-logout`,
        grant_types: ['authorization_code', 'refresh_token', 'client_credentials', 'urn:ietf:params:oauth:grant-type:token-exchange'],
      },
    ],
    scopes: { 'api:read': 'Read data from the demo API', 'ledger:read': 'Read the demo ledger' },
    resourceServers: { [audience]: { scope: 'api:read' }, [ledgerAudience]: { scope: 'ledger:read' } },
    // DPoP with nonces (RFC 9449 §8), so the demo exercises the nonce round trip too.
    dpopNonces: true,
    // RFC 9126: advertised, so the gateway's `auto` pushes every sign-in (the browser's URL
    // carries only client_id and request_uri).
    pushedAuthorizationRequests: 'offered',
    // The demo shows how the user signed in (password, or password and code) from the start.
    acrInEveryIdToken: true,
    defaultResource: audience,
    ttl: devTtlFromEnv(),
    logger: (line) => logger.debug({ component: 'dev-idp' }, line),
  });
  const idpServer = await idp.listen(dev.idp.port, host);
  const api = createDemoApi({
    issuer: oidc.issuer,
    audience,
    requiredScope: 'api:read',
    otherAudiences: { [ledgerAudience]: 'ledger:read' },
    dpop: { requireNonce: true },
  });
  let apiServer: Awaited<ReturnType<typeof api.listen>>;
  try {
    apiServer = await api.listen(dev.api.port, host);
  } catch (err) {
    await idpServer.close();
    throw new StartupError(`demo API: cannot listen on port ${dev.api.port} (${err instanceof Error ? err.message : 'unknown error'})`);
  }

  return {
    logger,
    summary: [
      `gateway + demo SPA   ${config.server.publicUrl}`,
      `dev OpenID provider  ${oidc.issuer} (users alice / alice-password, bob / bob-password; connected apps at ${oidc.issuer}/account)`,
      `demo API             ${audience}/api/hello (proxied at ${config.server.publicUrl}/api/hello)`,
    ],
    async createRuntime() {
      try {
        return await createRuntime(config, { logger });
      } catch (err) {
        if (!(err instanceof StartupError) || !dev.memoryStoreFallback) throw err;
        logger.warn(
          { event: 'memory_store_fallback', reason: err.message },
          '!!! NO REDIS: the demo runs on an IN-MEMORY session store. Sessions vanish on restart and are not shared between processes. Set REDIS_URL to use Redis. Never run production like this. !!!',
        );
        return createRuntime(config, { logger, redis: createMemoryRedis() });
      }
    },
    async stop() {
      await Promise.allSettled([idpServer.close(), apiServer.close()]);
    },
  };
}
