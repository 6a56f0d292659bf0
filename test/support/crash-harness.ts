/**
 * The stage of the crash-point tests (test/integration/reliability/crash-points-*.test.ts): a
 * real redis-server of their own, a real provider and upstream, a victim gateway process A
 * (started as main.ts starts it) whose Redis link goes through a crash relay, and a survivor
 * gateway process B on the same Redis directly, where what a crash left is judged while A is
 * started again on its port.
 *
 * A flow is run once to count the data commands A sends to Redis, then again for each point N
 * with A SIGKILLed at its Nth command: `before` (the command never reaches Redis) or `after`
 * (Redis ran it, A never saw the answer).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { createSealer } from '../../src/crypto/seal.js';
import { digest } from '../../src/redis/keys.js';
import { createRecordCodec, type StoredSession } from '../../src/session/record-codec.js';
import { parseTokenSet, type TokenSet } from '../../src/session/tokens.js';
import { BrowserClient } from './browser-client.js';
import { cliOidc, ensureBuilt, killAllCli, startCliGateway, writeConfigFile, type Spawned } from './cli-process.js';
import { randomKey, randomSecret } from './config.js';
import { completeAtProvider, signIn } from './drive-login.js';
import { gatewayClient } from './gateway.js';
import { startTestProvider, type TestProvider } from './oidc-provider.js';
import { startCrashRelay, type CrashMode, type CrashRelay } from './crash-relay.js';
import { findFreePort, startRedisServer, type RedisServer } from './redis-server.js';
import { startUpstream, type Upstream } from './upstream.js';
import { withTimeout } from './wait.js';
import { sessionIdFromCookie } from './assertions.js';

export const PREFIX = 'crash:';
export const COOKIE = 'bff';
const csrf = { 'x-csrf': '1' };

export interface Signed {
  client: BrowserClient;
  /** `bff=<value>` as the browser sends it. */
  cookie: string;
  digest: string;
  tokens: TokenSet;
  user: string;
}

export interface Killed<T> {
  hit: boolean;
  command: string[] | undefined;
  /** What the flow's request answered, or the error it failed with (the process died under it). */
  outcome: T | Error;
}

export interface CrashStack {
  redis: RedisServer;
  admin: Redis;
  relay: CrashRelay;
  provider: TestProvider;
  upstream: Upstream;
  publicUrl: string;
  /** A's URL (the public URL) and B's. */
  aUrl: string;
  bUrl: string;
  a(): Spawned;
  signedIn(user?: string, client?: BrowserClient): Promise<Signed>;
  /** The data commands `flow` sends to Redis through A, run once undisturbed. */
  count(flow: () => Promise<unknown>): Promise<string[]>;
  /** Runs `flow` with A SIGKILLed at its `at`th command; A is started again before this returns. */
  killedAt<T>(at: number, mode: CrashMode, flow: () => Promise<T>): Promise<Killed<T>>;
  /** The stored session (auth opened) and its tokens, read from Redis directly. */
  session(d: string): Promise<{ stored: StoredSession; tokens: TokenSet | undefined } | undefined>;
  /** What is wrong in Redis now: keys without TTL, plaintext `secrets`, records missing from their user's index. */
  audit(secrets: readonly string[]): Promise<string[]>;
  close(): Promise<void>;
}

/** The sessions of every user are listed under `user:{...}`; the test provider's users. */
export const USERS = ['alice', 'bob'];

export async function startCrashStack(name: string, options: { accessTokenTtl?: number } = {}): Promise<CrashStack> {
  ensureBuilt();
  const tmp = mkdtempSync(path.join(os.tmpdir(), `bff-crash-${name}-`));
  const redis = await startRedisServer();
  const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  // A's sweeps of the revocation outbox run on a timer: a claim (the script that ranges the set)
  // is not the flow's, and A's retry interval is long, so that B takes up what A left. The
  // enlisting script is the flow's, and counted.
  const relay = await startCrashRelay(redis.url, (parts) => /^eval$/i.test(parts[0] ?? '') && (parts[1] ?? '').includes('ZRANGEBYSCORE'));
  const upstream = await startUpstream();
  const [portA, portB] = [await findFreePort(), await findFreePort()];
  const publicUrl = `http://127.0.0.1:${portA}`;
  const provider = await startTestProvider({
    clients: [gatewayClient(publicUrl)],
    ...(options.accessTokenTtl ? { ttl: { AccessToken: options.accessTokenTtl } } : {}),
  } as Parameters<typeof startTestProvider>[0]);
  const key = randomKey();
  const shared = {
    oidc: cliOidc(provider.issuer),
    session: { secrets: [randomSecret()], encryptionKeys: [key], maxPerUser: 1000 },
    rateLimit: { loginPerMinute: 10_000 },
    routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
    log: { level: 'warn' },
  };
  const configFor = (port: number, redisUrl: string, revocationRetrySeconds: number) => ({
    server: { port, host: '127.0.0.1', publicUrl, shutdownTimeoutSeconds: 2 },
    redis: { url: redisUrl, keyPrefix: PREFIX, commandTimeoutMs: 2000 },
    ...shared,
    session: { ...shared.session, revocationRetrySeconds },
  });
  const aFile = writeConfigFile(tmp, 'a.yaml', configFor(portA, relay.url, 300));
  // Revocations a killed A left owed are taken up by B a second after (a quarter second's sweeps).
  const bFile = writeConfigFile(tmp, 'b.yaml', configFor(portB, redis.url, 1));
  let [a] = await Promise.all([startCliGateway(aFile, portA), startCliGateway(bFile, portB)]);
  const sealer = createSealer([key]);
  const codec = createRecordCodec(sealer);

  const openTokens = (d: string, sealed: string): TokenSet | undefined => {
    const json = sealer.open(sealed, d);
    return json === undefined ? undefined : parseTokenSet(json);
  };

  async function session(d: string) {
    const text = await admin.get(`${PREFIX}sess:{${d}}`);
    if (text === null) return undefined;
    const stored = codec.deserialize(d, text);
    if (!stored) return undefined;
    return { stored, tokens: stored.tokens.sealed ? openTokens(d, stored.tokens.sealed) : undefined };
  }

  async function signedIn(user = 'alice', client = new BrowserClient({ timeoutMs: 10_000 })): Promise<Signed> {
    await signIn(client, publicUrl, { user, password: `${user}-password` });
    const value = client.cookies(publicUrl)[COOKIE];
    if (!value) throw new Error('the sign-in set no session cookie');
    const d = digest(sessionIdFromCookie(value));
    const read = await session(d);
    if (!read?.tokens) throw new Error('the sign-in stored no tokens');
    return { client, cookie: `${COOKIE}=${value}`, digest: d, tokens: read.tokens, user };
  }

  async function scanKeys(): Promise<string[]> {
    const found: string[] = [];
    let cursor = '0';
    for (let i = 0; i < 10_000; i++) {
      const [next, batch] = await admin.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 500);
      found.push(...batch);
      cursor = next;
      if (cursor === '0') break;
    }
    return found;
  }

  async function audit(secrets: readonly string[]): Promise<string[]> {
    const problems: string[] = [];
    for (const k of await scanKeys()) {
      const ttl = await admin.pttl(k);
      if (ttl === -1) problems.push(`${k} has no TTL`);
      const type = await admin.type(k);
      const values =
        type === 'string' ? [(await admin.get(k)) ?? ''] : type === 'hash' ? Object.entries(await admin.hgetall(k)).flat() : type === 'set' ? await admin.smembers(k) : type === 'zset' ? await admin.zrange(k, 0, -1) : [];
      for (const v of values) {
        for (const s of secrets) if (s && v.includes(s)) problems.push(`${k} holds a token in plaintext`);
        if (/eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+/.test(v)) problems.push(`${k} holds a JWT in plaintext`);
      }
      const m = /^crash:sess:\{(.+)\}$/.exec(k);
      if (m) {
        const d = m[1] as string;
        const read = await session(d);
        if (!read?.stored.auth || !read.tokens) continue;
        const auth = read.stored.auth;
        const entry = await admin.hget(`${PREFIX}user:{${digest(`${auth.iss} ${auth.sub}`)}}`, auth.handle);
        if (entry !== d && entry !== `pending:${d}`) problems.push(`session ${auth.handle} (a record with tokens) is missing from its user's index`);
        if (auth.sid && !(await admin.sismember(`${PREFIX}sid:{${digest(`${auth.iss} ${auth.sid}`)}}`, d))) {
          problems.push(`session ${auth.handle} is missing from its provider session's index`);
        }
      }
    }
    return problems;
  }

  return {
    redis,
    admin,
    relay,
    provider,
    upstream,
    publicUrl,
    aUrl: publicUrl,
    bUrl: `http://127.0.0.1:${portB}`,
    a: () => a,
    signedIn,
    async count(flow) {
      relay.record();
      try {
        await flow();
      } finally {
        relay.disarm();
      }
      return relay.recorded();
    },
    async killedAt(at, mode, flow) {
      let command: string[] | undefined;
      const victim = a;
      relay.arm({
        at,
        mode,
        onHit: (parts) => {
          command = parts;
          victim.child.kill('SIGKILL');
        },
      });
      const outcome = await flow().catch((err: Error) => err);
      const hit = relay.hit();
      relay.disarm();
      if (hit) {
        await withTimeout(victim.exited, 5_000, 'A killed');
        a = await startCliGateway(aFile, portA);
      }
      return { hit, command, outcome };
    },
    session,
    audit,
    async close() {
      killAllCli();
      await withTimeout(a.exited, 5_000, 'A exit', { fallback: undefined });
      admin.disconnect();
      await relay.close();
      await provider.close();
      await upstream.close();
      await redis.close();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/** A started login of `client` on the gateway: the callback URL the provider sends it back to (not yet requested). */
export async function callbackUrlFor(stack: CrashStack, client: BrowserClient, user = 'alice'): Promise<string> {
  const res = await client.get(`${stack.publicUrl}/auth/login`);
  if (!res.redirectUrl) throw new Error(`login did not redirect: ${res.status}`);
  return completeAtProvider(client, res.redirectUrl, { user, password: `${user}-password` });
}

export interface Status {
  status: number;
  body: string;
}

export async function call(url: string, cookie: string | undefined, method = 'GET', timeoutMs = 8_000): Promise<Status> {
  const res = await fetch(url, { method, headers: { ...csrf, ...(cookie ? { cookie } : {}) }, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
  return { status: res.status, body: await res.text() };
}

/** 401 login_required in SPEC §6's shape. */
export function isLoginRequired(s: Status): boolean {
  if (s.status !== 401) return false;
  try {
    const body = JSON.parse(s.body) as Record<string, unknown>;
    return body.error === 'login_required' && typeof body.error_description === 'string';
  } catch {
    return false;
  }
}

/**
 * Where a browser holding `cookie` stands on B: 'in' (its session works: /auth/user 200 and
 * listed as current in /auth/sessions), 'out' (401 login_required), or a description of what is wrong.
 */
export async function standing(stack: CrashStack, cookie: string): Promise<'in' | 'out' | string> {
  const user = await call(`${stack.bUrl}/auth/user`, cookie);
  if (isLoginRequired(user)) return 'out';
  if (user.status !== 200) return `/auth/user answered ${user.status} ${user.body.slice(0, 120)}`;
  const list = await call(`${stack.bUrl}/auth/sessions`, cookie);
  if (list.status !== 200) return `/auth/sessions answered ${list.status} ${list.body.slice(0, 120)}`;
  const sessions = JSON.parse(list.body) as Array<{ current: boolean }>;
  if (!sessions.some((s) => s.current)) return 'signed in (/auth/user 200) but missing from /auth/sessions';
  return 'in';
}

export { gatewayClient };
