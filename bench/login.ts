/**
 * `npm run bench -- --login`: sign-ins per second through the gateway, the whole flow as a
 * browser drives it (test/support/drive-login.ts): GET /auth/login (login transaction in
 * Redis, rate limit, login cookie) → the provider's authorize, login form and consent
 * (oidc-provider, bench/servers/idp.ts) → GET /auth/callback (state, iss, code exchange with
 * PKCE, ID token validation, session write, index entries). Each sign-in is a fresh browser
 * (no provider session to reuse). `--login-concurrency` sign-ins run at once.
 *
 * Reported: sign-ins/s, the gateway process's CPU per sign-in (what sizing needs: the
 * provider's share is the provider's), the provider's and Redis's CPU per sign-in, and Redis
 * commands per sign-in. The provider does most of the work of a sign-in, so the rate is the
 * provider's on this machine; the gateway's CPU per sign-in is the figure that carries over.
 */
import { performance } from 'node:perf_hooks';
import { BrowserClient } from '../test/support/browser-client.js';
import { signIn } from '../test/support/drive-login.js';
import type { RedisServer } from '../test/support/redis-server.js';
import { cpuMs } from './lib/cpu.js';
import { median, round } from './lib/stats.js';

export interface LoginSectionInput {
  gatewayUrl: string;
  cookieName: string;
  redis: RedisServer;
  pids: { gateway: number; provider: number; redis: number };
  durationSec: number;
  concurrency: number;
  log: (line: string) => void;
}

export interface LoginResult {
  signIns: number;
  failures: number;
  seconds: number;
  perSecond: number;
  /** Milliseconds of one sign-in, end to end as the driving browser saw it (median, p99). */
  p50Ms: number;
  p99Ms: number;
  cpuMsPerSignIn: { gateway: number; provider: number; redis: number };
  redisCommandsPerSignIn: number;
  redisByCommandPerSignIn: Record<string, number>;
}

const isAdmin = (name: string) => name === 'info' || name.startsWith('config');

export async function loginSection(input: LoginSectionInput): Promise<LoginResult> {
  const cpu = () => ({ gateway: cpuMs(input.pids.gateway) ?? 0, provider: cpuMs(input.pids.provider) ?? 0, redis: cpuMs(input.pids.redis) ?? 0 });
  const one = async (): Promise<number> => {
    const t0 = performance.now();
    const client = new BrowserClient();
    await signIn(client, input.gatewayUrl, { user: 'alice', password: 'alice-password' });
    if (!client.cookies(input.gatewayUrl)[input.cookieName]) throw new Error('a sign-in ended without a session cookie');
    return performance.now() - t0;
  };
  // Warm-up: the provider's and the gateway's code paths compiled, connections open.
  input.log(`login: warm-up (${input.concurrency * 2} sign-ins)`);
  await Promise.all(Array.from({ length: input.concurrency * 2 }, one));

  const before = await input.redis.commandStats();
  const cpuBefore = cpu();
  const times: number[] = [];
  let failures = 0;
  let firstError: unknown;
  const t0 = performance.now();
  const end = t0 + input.durationSec * 1000;
  const loop = async () => {
    while (performance.now() < end) {
      try {
        times.push(await one());
      } catch (err) {
        failures += 1;
        firstError ??= err;
        if (failures > 20) return;
      }
    }
  };
  input.log(`login: ${input.concurrency} concurrent sign-ins for ${input.durationSec} s`);
  await Promise.all(Array.from({ length: input.concurrency }, loop));
  const seconds = (performance.now() - t0) / 1000;
  const cpuAfter = cpu();
  const after = await input.redis.commandStats();
  if (failures > 0) input.log(`login: ${failures} sign-ins failed; first: ${firstError instanceof Error ? firstError.message : String(firstError)}`);
  const n = Math.max(1, times.length);
  const byCommand: Record<string, number> = {};
  let commands = 0;
  for (const [name, calls] of Object.entries(after)) {
    const d = calls - (before[name] ?? 0);
    if (isAdmin(name) || d <= 0) continue;
    byCommand[name] = round(d / n, 2);
    commands += d;
  }
  const sorted = [...times].sort((a, b) => a - b);
  return {
    signIns: times.length,
    failures,
    seconds: round(seconds, 1),
    perSecond: round(times.length / seconds, 1),
    p50Ms: round(median(sorted), 1),
    p99Ms: round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0, 1),
    cpuMsPerSignIn: {
      gateway: round((cpuAfter.gateway - cpuBefore.gateway) / n, 2),
      provider: round((cpuAfter.provider - cpuBefore.provider) / n, 2),
      redis: round((cpuAfter.redis - cpuBefore.redis) / n, 2),
    },
    redisCommandsPerSignIn: round(commands / n, 1),
    redisByCommandPerSignIn: byCommand,
  };
}

export const LOGIN_HEADER = ['sign-ins', 'failed', 'sign-ins/s', 'p50 ms', 'p99 ms', 'gateway CPU ms/sign-in', 'provider CPU ms/sign-in', 'redis CPU ms/sign-in', 'Redis cmds/sign-in'];

export const loginRows = (r: LoginResult) => [
  [r.signIns, r.failures, r.perSecond, r.p50Ms, r.p99Ms, r.cpuMsPerSignIn.gateway, r.cpuMsPerSignIn.provider, r.cpuMsPerSignIn.redis, r.redisCommandsPerSignIn],
];
