/**
 * A gateway whose provider sits behind the tampering front (provider-front.ts), and key
 * rotation: oidc-provider reads its keys once, at start, so a real rotation is a restart with
 * the new key first and the old ones still published. The front keeps the issuer URL while the
 * provider behind it is replaced.
 */
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestClock, type TestGateway } from './gateway.js';
import type { TestProvider } from './oidc-provider.js';
import { startFrontedProvider, startProviderFront, type ProviderFront } from './provider-front.js';

export interface FrontedStack {
  front: ProviderFront;
  gw: TestGateway;
  /** The gateway's clock: advanced past a limit instead of waiting for it. */
  clock: TestClock;
  /** The provider behind the front now (a rotation replaces it). */
  provider(): TestProvider;
  /** Restarts the provider behind the front with `key` first and the old keys still published. */
  rotateTo(key: JWK): Promise<void>;
  close(): Promise<void>;
}

export async function newSigningKey(kid: string): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
}

export async function startFrontedStack(): Promise<FrontedStack> {
  const front = await startProviderFront();
  const reserved = await reserveServer();
  const clients = [gatewayClient(reserved.url)];
  let provider = await startFrontedProvider(front, { clients });
  const retired: TestProvider[] = [];
  const clock = createTestClock();
  const gw = await startTestGateway(buildTestConfig({ issuer: front.url, publicUrl: reserved.url }), reserved, { clock });
  return {
    front,
    gw,
    clock,
    provider: () => provider,
    async rotateTo(key) {
      const old = provider;
      provider = await startFrontedProvider(front, { clients, jwks: { keys: [key, ...old.idp.privateJwks.keys] } });
      retired.push(old);
      await old.stop();
    },
    async close() {
      await gw.close();
      for (const p of [provider, ...retired]) await p.close();
      await front.close();
    },
  };
}
