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
