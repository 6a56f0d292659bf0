/**
 * The usual integration set-up in one call: a gateway listening on a free port, a test provider
 * with that gateway registered as its client, and the gateway's config pointing at it.
 */
import type { Config } from '../../src/config/load.js';
import type { DevClient } from '../../src/dev/idp.js';
import type { AppOptions } from '../../src/app.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestClock, type TestConfigInput, type TestGateway } from './gateway.js';
import { startTestProvider, type TestProvider, type TestProviderOptions } from './oidc-provider.js';

export interface StackOptions {
  /** Gateway config beyond issuer and publicUrl. */
  config?: Omit<TestConfigInput, 'issuer' | 'publicUrl'>;
  /** Provider options beyond the gateway's client registration. */
  provider?: Omit<TestProviderOptions, 'clients'>;
  /** Changes to the gateway's client registration (e.g. more grant types). */
  client?: Partial<DevClient>;
  clock?: TestClock;
  /** createApp's options (e.g. a short event-stream heartbeat). */
  app?: AppOptions;
}

export interface Stack {
  provider: TestProvider;
  config: Config;
  gateway: TestGateway;
  close(): Promise<void>;
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const reserved = await reserveServer();
  const provider = await startTestProvider({ ...options.provider, clients: [gatewayClient(reserved.url, options.client)] });
  const config = buildTestConfig({ ...options.config, issuer: provider.issuer, publicUrl: reserved.url });
  const gateway = await startTestGateway(config, reserved, {
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.app ? { app: options.app } : {}),
  });
  return {
    provider,
    config,
    gateway,
    async close() {
      await gateway.close();
      await provider.close();
    },
  };
}

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';

export interface ExchangeStackOptions {
  clock?: TestClock;
  /** The provider's resource servers (RFC 8707): URL → its scopes and their descriptions. The first is the sign-in token's audience. */
  apis: Record<string, Record<string, string>>;
  /** The gateway's sign-in scopes beyond openid, profile and offline_access. */
  scopes: string[];
  routes: NonNullable<TestConfigInput['routes']>;
  /** Seconds the sign-in token (the first API's) lives; the provider's default otherwise. */
  signInTokenTtl?: number;
}

/**
 * The stack of the token-exchange tests: a provider with resource servers that lets the
 * gateway's client exchange tokens (RFC 8693), and a gateway whose sign-in asks for the first API.
 */
export function startExchangeStack(options: ExchangeStackOptions): Promise<Stack> {
  const apis = Object.entries(options.apis);
  const main = apis[0]?.[0];
  if (!main) throw new Error('startExchangeStack: at least one API');
  return startStack({
    ...(options.clock ? { clock: options.clock } : {}),
    client: { grant_types: ['authorization_code', 'refresh_token', TOKEN_EXCHANGE] },
    provider: {
      scopes: Object.assign({}, ...apis.map(([, scopes]) => scopes)) as Record<string, string>,
      resourceServers: Object.fromEntries(
        apis.map(([url, scopes]) => [
          url,
          { scope: Object.keys(scopes).join(' '), ...(url === main && options.signInTokenTtl ? { accessTokenTTL: options.signInTokenTtl } : {}) },
        ]),
      ),
      defaultResource: main,
    },
    config: {
      scopes: ['openid', 'profile', 'offline_access', ...options.scopes],
      extraAuthParams: { resource: main },
      routes: options.routes,
    },
  });
}
