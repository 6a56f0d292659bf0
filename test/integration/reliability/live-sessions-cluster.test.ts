/**
 * The session-event bus on a local 3-master Redis Cluster (issue 16, "single/Sentinel/Cluster"):
 * a logout through gateway B reaches gateway A's GET /auth/events through the cluster's plain
 * pub/sub channel (PUBLISH on any node reaches subscribers on every node), and the re-check after
 * a reconnect reads sessions that live in different slots (no CROSSSLOT pipeline).
 *
 * Mutation check (done by hand once): src/redis/client.ts, existsMany: drop the
 * `client instanceof Cluster` branch (a pipeline across slots) → the re-check throws, is
 * reported as a failed check and ends nothing: "re-checks … on the cluster" fails.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { openStream } from '../../support/live-streams.js';
import { startRedisCluster, type RedisCluster } from '../../support/redis-server.js';
import { startStack, type Stack } from '../../support/stack.js';
import { sessionIdFromCookie } from '../../support/assertions.js';
import { digest } from '../../../src/redis/keys.js';

let cluster: RedisCluster;
let stack: Stack;
let b: TestGateway;

beforeAll(async () => {
  cluster = await startRedisCluster();
  stack = await startStack({ config: { redis: { cluster: { nodes: cluster.nodes }, url: undefined } } });
  // A second instance: same config (secrets, prefix, publicUrl), its own runtime and subscriber.
  b = await startTestGateway(stack.config);
}, 60_000);

afterAll(async () => {
  await b?.close();
  await stack?.close();
  await cluster?.close();
});

async function signedIn(): Promise<{ client: BrowserClient; cookieValue: string; cookie: string }> {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  const cookieValue = client.cookies(stack.gateway.url)[stack.config.derived.sessionCookieName] as string;
  return { client, cookieValue, cookie: `${stack.config.derived.sessionCookieName}=${cookieValue}` };
}

describe('live sessions on Redis Cluster', () => {
  it('a logout through B reaches /auth/events on A', async () => {
    const { client, cookie } = await signedIn();
    const stream = await openStream(`${stack.gateway.url}/auth/events`, { cookie });
    expect(stream.status).toBe(200);
    const res = await client.post(`${b.url}/auth/logout`, { headers: { cookie, 'x-csrf': '1' } });
    expect(res.status).toBe(200);
    expect(JSON.parse((await stream.waitForEvent('signed-out', 15_000)).data)).toEqual({ reason: 'logout' });
  }, 60_000);

  it('re-checks held sessions in different slots on the cluster, ending only the gone ones', async () => {
    const live = await Promise.all([signedIn(), signedIn(), signedIn()]);
    const digests = live.map((s) => digest(sessionIdFromCookie(s.cookieValue)));
    const gone = ['g'.repeat(32), 'h'.repeat(32), 'i'.repeat(32)];
    const ended: string[] = [];
    const releases = [...digests, ...gone].map((d) => stack.gateway.runtime.held.hold(d, { createdAt: Date.now() }, () => ended.push(d)));
    await stack.gateway.runtime.held.recheck();
    expect(ended.sort()).toEqual([...gone].sort());
    for (const release of releases) release();
  }, 60_000);
});
