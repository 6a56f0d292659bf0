/**
 * A client-credentials grant answered while Redis fails over (found by red team): three
 * sentinels, two gateways (A, B). A holds the grant's lock (replicated before the master hangs);
 * the provider answers while the master hangs, so A's write of the shared token times out.
 * Before: the token the provider had just issued was dropped (A's caller got 503 with it in
 * hand), and the lock, alive on the promoted replica, held B's calls back for up to 12 s each
 * until it lapsed. Now A serves the token at once, and shares it (and lets the lock go) as
 * soon as the new master answers.
 *
 * Mutations that fail this file (checked by hand): src/proxy/client-token.ts fetchAndShare,
 * `await share(key, cached)` without its try/catch (the first call's 503); shareLater's
 * interval body `return;` (B waits behind the lock).
 */
import { randomBytes } from 'node:crypto';
import { BrowserClient } from '../../support/browser-client.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { isGrant, startFrontedProvider, startProviderFront, type ProviderFront } from '../../support/provider-front.js';
import { startRedisSentinel, type RedisSentinelSet } from '../../support/redis-sentinel.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { eventually, withTimeout } from '../../support/wait.js';

const csrf = { 'x-csrf': '1' };
let set: RedisSentinelSet;
let upstream: Upstream;
let front: ProviderFront;
let provider: TestProvider;
let a: TestGateway;
let b: TestGateway;

beforeAll(async () => {
  set = await startRedisSentinel({ sentinels: 3 });
  upstream = await startUpstream();
  const ra = await reserveServer();
  const rb = await reserveServer();
  front = await startProviderFront();
  provider = await startFrontedProvider(front, { clients: [gatewayClient(ra.url, { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] })] });
  const shared = {
    issuer: front.url,
    publicUrl: ra.url,
    keyPrefix: `cc${randomBytes(3).toString('hex')}:`,
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: undefined, commandTimeoutMs: 1000, sentinel: { name: set.name, nodes: set.nodes } },
    routes: [{ path: '/svc', target: upstream.url, auth: 'client' as const, scopes: ['api:read'] }],
  };
  a = await startTestGateway(buildTestConfig(shared), ra);
  b = await startTestGateway(buildTestConfig(shared), rb);
}, 90_000);

afterAll(async () => {
  set?.master.resume();
  await a?.close();
  await b?.close();
  await provider?.close();
  await front?.close();
  await upstream?.close();
  await set?.close();
});

it('serves the token answered while the master hangs, and shares it once the replica is promoted', async () => {
  let answer!: () => void;
  const answered = new Promise<void>((resolve) => (answer = resolve));
  front.intercept(async (req) => {
    if (!isGrant(req, 'client_credentials')) return undefined;
    await answered;
    return front.ask(req);
  });
  const pending = new BrowserClient({ timeoutMs: 30_000 }).get(`${a.url}/svc/echo`, { headers: csrf });
  await front.waitFor((req) => isGrant(req, 'client_credentials'), 1, 10_000);
  await set.waitForReplica(set.master);
  set.master.pause();
  front.intercept(undefined);
  answer();
  expect((await withTimeout(pending, 30_000, 'the first call')).status).toBe(200);

  const replica = set.replica;
  if (!replica) throw new Error('the set has a replica');
  await set.waitForMaster(replica, 30_000);
  await eventually('B reaching the new master', 30_000, async () => (await new BrowserClient().get(`${b.url}/readyz`)).status === 200, { intervalMs: 100 });
  // B finds the token A shared: no wait behind the lock (that took up to 12 s, then a 502), no
  // second grant. A's client follows the promotion on its own schedule, so B asks until then.
  await eventually(
    "B served A's token",
    10_000,
    async () => {
      const res = await new BrowserClient({ timeoutMs: 2_000 }).get(`${b.url}/svc/echo`, { headers: csrf }).catch(() => undefined);
      return res?.status === 200;
    },
    { intervalMs: 200 },
  );
  expect(provider.counters.grants.client_credentials).toBe(1);
}, 150_000);
