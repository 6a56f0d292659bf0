/**
 * Two gateway processes (A and B) on one real redis-server, the real provider behind the
 * tampering front (a refresh answer can be held, or Redis failed as it arrives), one upstream,
 * and one test clock: the stage of the tests in which Redis fails during a refresh
 * (test/integration/reliability). `aRedisUrl` puts something between A and Redis (a TCP gate).
 */
import type { TokenSet } from '../../src/session/tokens.js';
import { tokensOfSession } from './assertions.js';
import { BrowserClient } from './browser-client.js';
import { signIn } from './drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient, reserveServer, startTestGateway, type TestClock, type TestGateway } from './gateway.js';
import type { TestProvider } from './oidc-provider.js';
import { startFrontedProvider, startProviderFront, type ProviderFront } from './provider-front.js';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { startUpstream, type Upstream } from './upstream.js';

export interface RefreshStack {
  clock: TestClock;
  redis: RedisServer;
  front: ProviderFront;
  provider: TestProvider;
  upstream: Upstream;
  a: TestGateway;
  b: TestGateway;
  /** A browser signed in on A whose session cookie goes to B too, and its tokens as signed in. */
  signedIn(): Promise<{ client: BrowserClient; cookie: string; before: TokenSet }>;
  /** Moves the gateways' clock just past `tokens`' expiry: the next call refreshes. */
  expire(tokens: TokenSet): void;
  /** Stops A (as SIGTERM would) ahead of the rest. */
  closeA(): Promise<void>;
  close(): Promise<void>;
}

export async function startRefreshStack(options: { appendOnly?: boolean; aRedisUrl?: (redisUrl: string) => Promise<string> } = {}): Promise<RefreshStack> {
  const clock = createTestClock();
  const redis = await startRedisServer(options.appendOnly ? { extraArgs: ['--appendonly', 'yes', '--appendfsync', 'always'] } : {});
  const upstream = await startUpstream();
  const front = await startProviderFront();
  const reserved = await reserveServer();
  const provider = await startFrontedProvider(front, { clients: [gatewayClient(reserved.url)] });
  const config = buildTestConfig({
    issuer: front.url,
    publicUrl: reserved.url,
    redisUrl: redis.url,
    // Redis is killed or cut off, not stalled: commands fail at once; the timeout only guards a busy machine.
    redis: { commandTimeoutMs: 3000 },
    routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
  });
  const aUrl = options.aRedisUrl ? await options.aRedisUrl(redis.url) : redis.url;
  const a = await startTestGateway({ ...config, redis: { ...config.redis, url: aUrl } }, reserved, { clock });
  const b = await startTestGateway(config, undefined, { clock });
  let aOpen = true;
  const closeA = async () => {
    if (!aOpen) return;
    aOpen = false;
    await a.close();
  };
  return {
    clock,
    redis,
    front,
    provider,
    upstream,
    a,
    b,
    async signedIn() {
      const client = new BrowserClient({ timeoutMs: 15_000 });
      await signIn(client, a.url);
      const name = a.config.derived.sessionCookieName;
      const cookie = client.cookies(a.url)[name] as string;
      client.setCookie(b.url, name, cookie);
      const before = await tokensOfSession(b, cookie);
      if (!before?.refreshToken || before.expiresAt === undefined) throw new Error('the sign-in left no refreshable token set');
      return { client, cookie, before };
    },
    expire(tokens) {
      clock.advance((tokens.expiresAt as number) - Math.floor(clock.now() / 1000) + 1);
    },
    closeA,
    async close() {
      await b.close();
      await closeA();
      await provider.close();
      await front.close();
      await upstream.close();
      await redis.close();
    },
  };
}
