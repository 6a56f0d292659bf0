/**
 * One conformance setup: the real gateway (real Redis), the real oidc-provider, and the
 * tampering front standing at the issuer URL between them. The gateway caches the provider's
 * metadata and keys, so a test that needs other metadata or another key set starts its own rig.
 */
import type { JWK } from 'jose';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestClock, type TestConfigInput, type TestGateway } from '../support/gateway.js';
import type { TestProvider, TestProviderOptions } from '../support/oidc-provider.js';
import { startFrontedProvider, startProviderFront, type Interceptor, type ProviderFront } from '../support/provider-front.js';

export const CLIENT_ID = 'bff-test';
export const CLIENT_SECRET = 'bff-test-secret-0123456789abcdef';

export interface Rig {
  front: ProviderFront;
  provider: TestProvider;
  gw: TestGateway;
  /** The path of the provider's jwks_uri at the front, as the metadata names it. */
  jwksPath: string;
  close(): Promise<void>;
}

export interface RigOptions {
  /** Gateway config beyond issuer and publicUrl. */
  gateway?: Omit<TestConfigInput, 'issuer' | 'publicUrl'>;
  /** Client registration overrides at the provider. */
  client?: Record<string, unknown>;
  /** The provider's own signing keys (private JWKs). */
  providerKeys?: JWK[];
  /** Installed before the gateway starts, so discovery already goes through it; left in place. */
  interceptAtDiscovery?: (front: ProviderFront) => Interceptor;
  clock?: TestClock;
  /** Default true: wait until discovery has succeeded. */
  waitForProvider?: boolean;
}

export async function startRig(opts: RigOptions = {}): Promise<Rig> {
  const front = await startProviderFront();
  const reserved = await reserveServer();
  const providerOptions: Omit<TestProviderOptions, 'publicIssuer'> = {
    clients: [gatewayClient(reserved.url, opts.client)],
    ...(opts.providerKeys ? { jwks: { keys: opts.providerKeys } } : {}),
  };
  const provider = await startFrontedProvider(front, providerOptions);
  front.intercept(opts.interceptAtDiscovery?.(front));
  const config = buildTestConfig({ ...opts.gateway, issuer: front.url, publicUrl: reserved.url });
  const gw = await startTestGateway(config, reserved, { waitForProvider: opts.waitForProvider ?? true, ...(opts.clock ? { clock: opts.clock } : {}) });
  return {
    front,
    provider,
    gw,
    get jwksPath() {
      return new URL(gw.runtime.provider.get().metadata.jwks_uri as string).pathname;
    },
    async close() {
      await gw.close();
      await provider.close();
      await front.close();
    },
  };
}
