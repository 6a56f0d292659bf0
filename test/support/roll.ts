/**
 * A rolling deploy in one test process: two gateways (startTestGateway: createRuntime and
 * createApp, as main.ts builds them) on one Redis and one key prefix, behind one public URL,
 * a "load balancer" that sends each request to the instance the test names. Their configs
 * differ as they do for the minutes of a roll.
 */
import { randomBytes } from 'node:crypto';
import { BrowserClient, type BrowserResponse } from './browser-client.js';
import { signIn } from './drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestClock, type TestConfigInput, type TestGateway } from './gateway.js';
import { startTestProvider, type TestProvider } from './oidc-provider.js';
import { redisUrlForTests } from './redis-server.js';
import { startUpstream, type Upstream } from './upstream.js';

export type Instance = 'old' | 'new';
export type RollInput = Omit<TestConfigInput, 'issuer' | 'publicUrl' | 'keyPrefix' | 'redisUrl'>;

export interface Roll {
  url: string;
  provider: TestProvider;
  upstream: Upstream;
  clock: TestClock;
  gw: Record<Instance, TestGateway>;
  /** The instance the load balancer sends the next requests to. */
  via(which: Instance): void;
  close(): Promise<void>;
}

const NAMES = ['alice', 'bob', 'carol', 'dave', 'erin', 'frank', 'grace', 'heidi', 'ivan', 'judy', 'mallory', 'niaj', 'olivia', 'peggy', 'rupert'];
const USERS = NAMES.map((id) => ({ id, password: `${id}-password`, claims: { name: id, email: `${id}@example.com` } }));

export async function startRoll(configs: Record<Instance, (upstreamUrl: string) => RollInput>): Promise<Roll> {
  const front = await reserveServer();
  const upstream = await startUpstream();
  const provider = await startTestProvider({ users: USERS, clients: [gatewayClient(front.url)] });
  const keyPrefix = `roll${randomBytes(4).toString('hex')}:`;
  const clock = createTestClock();
  // One key and one secret for both, unless a config names its own (buildTestConfig makes new ones per config).
  const keys = { secrets: [randomBytes(32).toString('base64url')], encryptionKeys: [randomBytes(32).toString('base64')] };
  const start = (input: RollInput) =>
    startTestGateway(
      buildTestConfig({ ...input, session: { ...keys, ...input.session }, issuer: provider.issuer, publicUrl: front.url, keyPrefix, redisUrl: redisUrlForTests() }),
      undefined,
      { clock },
    );
  const gw = { old: await start(configs.old(upstream.url)), new: await start(configs.new(upstream.url)) };
  let current: Instance = 'old';
  front.server.on('request', (req, res) => gw[current].app(req, res));
  return {
    url: front.url,
    provider,
    upstream,
    clock,
    gw,
    via(which) {
      current = which;
    },
    async close() {
      front.server.closeAllConnections();
      await new Promise<void>((resolve) => front.server.close(() => resolve()));
      await gw.old.close();
      await gw.new.close();
      await provider.close();
      await upstream.close();
    },
  };
}

export async function signInVia(roll: Roll, which: Instance, user: string): Promise<BrowserClient> {
  const client = new BrowserClient();
  roll.via(which);
  await signIn(client, roll.url, { user, password: `${user}-password` });
  return client;
}

export function callVia(roll: Roll, which: Instance, client: BrowserClient, path = '/api/echo'): Promise<BrowserResponse> {
  roll.via(which);
  return client.get(`${roll.url}${path}`, { headers: { 'x-csrf': '1' } });
}
