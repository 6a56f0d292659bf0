/**
 * clientAuthMethod private_key_jwt: the gateway authenticates to the token endpoint with a
 * signed assertion (RFC 7523), and the provider accepts nothing else for this client.
 */
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const clock = createTestClock();
let provider: TestProvider;
let upstream: Upstream;
let gw: TestGateway;
let jwksServer: http.Server;

beforeAll(async () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'gateway-key-1' };
  upstream = await startUpstream();
  const reserved = await reserveServer();
  // Published at a jwks_uri (as a real deployment would): oidc-provider's plain-object check
  // refuses an inline `jwks` built in Jest's VM realm.
  jwksServer = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
  await new Promise<void>((r) => jwksServer.listen(0, '127.0.0.1', r));
  const jwksUri = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks`;
  const client = gatewayClient(reserved.url, { token_endpoint_auth_method: 'private_key_jwt', jwks_uri: jwksUri });
  provider = await startTestProvider({ clients: [client as Parameters<typeof startTestProvider>[0]['clients'][number]] });
  const config = buildTestConfig({
    issuer: provider.issuer,
    publicUrl: reserved.url,
    oidc: { clientAuthMethod: 'private_key_jwt', privateKey: privateKey.export({ format: 'pem', type: 'pkcs8' }) as string },
    routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
  });
  gw = await startTestGateway(config, reserved, { clock });
});

afterAll(async () => {
  await gw?.close();
  await provider?.close();
  await upstream?.close();
  await new Promise<void>((r) => (jwksServer ? jwksServer.close(() => r()) : r()));
});

it('signs in and refreshes with a signed client assertion', async () => {
  const client = new BrowserClient();
  const { hops } = await signIn(client, gw.url);
  expect(hops.find((h) => h.url.startsWith(`${gw.url}/auth/callback`))?.status).toBe(302);
  expect((await client.get(`${gw.url}/auth/user`, { headers: { 'x-csrf': '1' } })).status).toBe(200);
  const grants = provider.counters.grants.refresh_token ?? 0;
  const failures = provider.counters.grantFailures.refresh_token ?? 0;
  clock.advance(3600);
  expect((await client.get(`${gw.url}/api/echo`, { headers: { 'x-csrf': '1' } })).status).toBe(200);
  expect((provider.counters.grants.refresh_token ?? 0) - grants).toBe(1);
  expect(provider.counters.grantFailures.refresh_token ?? 0).toBe(failures);
});
