/**
 * The refresh storm of `npm run bench`: the gateway's clock is moved past the access token's
 * expiry, then `stormCalls` concurrent calls of one session go out over pre-opened keep-alive
 * sockets. Every call must succeed with the same new token (the upstream answers a short digest
 * of the Authorization header it got, never the token) and the provider must count exactly one
 * refresh_token grant per trial.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import type { RedisServer } from '../test/support/redis-server.js';
import type { BenchChild } from './lib/ipc.js';
import { statsDelta } from './lib/redis-stats.js';
import { median } from './lib/stats.js';

export interface StormSettings {
  stormCalls: number;
  stormTrials: number;
  /** Seconds the gateway's clock moves before each trial (past the access token's lifetime). */
  clockStepSec: number;
}

interface StormCall {
  status: number;
  digest: string | undefined;
  ms: number;
}

function stormCall(agent: http.Agent, url: URL, headers: Record<string, string>, t0: number): Promise<StormCall> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent, headers, timeout: 15_000 }, (res) => {
      res.resume();
      res.once('end', () =>
        resolve({ status: res.statusCode ?? 0, digest: res.headers['x-bearer-digest'] as string | undefined, ms: performance.now() - t0 }),
      );
      res.once('error', () => resolve({ status: 0, digest: undefined, ms: performance.now() - t0 }));
    });
    req.once('timeout', () => req.destroy(new Error('timeout')));
    req.once('error', () => resolve({ status: 0, digest: undefined, ms: performance.now() - t0 }));
  });
}

export interface StormTrial {
  trial: number;
  calls: number;
  ok: number;
  statuses: Record<string, number>;
  refreshGrants: number;
  distinctTokens: number;
  tokenChanged: boolean;
  timeToLastMs: number;
  p50Ms: number;
  redisCommands: number;
  redisByCommand: Record<string, number>;
}

export async function refreshStorm(
  gateway: BenchChild,
  idp: BenchChild,
  redis: RedisServer,
  target: { url: string; headers: Record<string, string> },
  settings: StormSettings,
): Promise<StormTrial[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: settings.stormCalls });
  const headers = { ...target.headers, 'x-bench-echo-auth': '1' };
  const fire = async () => {
    const t0 = performance.now();
    return Promise.all(Array.from({ length: settings.stormCalls }, (_, i) => stormCall(agent, new URL(`${target.url}?storm=${i}`), headers, t0)));
  };
  const refreshGrants = async () =>
    (await idp.call<{ grants: Record<string, number> }>('counters')).grants.refresh_token ?? 0;
  try {
    // Opens the sockets (so the storm measures the gateway, not 200 TCP handshakes) and notes
    // the token in use.
    const warm = await fire();
    const bad = warm.filter((c) => c.status !== 200).length;
    if (bad > 0) throw new Error(`refresh storm warm-up: ${bad} of ${warm.length} calls failed`);
    let previous = new Set(warm.map((c) => c.digest));
    const trials: StormTrial[] = [];
    for (let trial = 1; trial <= settings.stormTrials; trial++) {
      const grantsBefore = await refreshGrants();
      await gateway.call('advanceClock', settings.clockStepSec);
      const before = await redis.commandStats();
      const calls = await fire();
      const after = await redis.commandStats();
      const grants = (await refreshGrants()) - grantsBefore;
      const digests = new Set(calls.map((c) => c.digest));
      const statuses: Record<string, number> = {};
      for (const c of calls) statuses[c.status] = (statuses[c.status] ?? 0) + 1;
      const times = calls.map((c) => c.ms).sort((a, b) => a - b);
      const delta = statsDelta(before, after);
      trials.push({
        trial,
        calls: calls.length,
        ok: statuses['200'] ?? 0,
        statuses,
        refreshGrants: grants,
        distinctTokens: digests.size,
        tokenChanged: [...digests].every((d) => !previous.has(d)),
        timeToLastMs: times[times.length - 1] ?? 0,
        p50Ms: median(times),
        redisCommands: delta.total,
        redisByCommand: delta.byCommand,
      });
      previous = digests;
    }
    return trials;
  } finally {
    agent.destroy();
  }
}

export const STORM_HEADER = ['trial', 'calls', 'ok', 'refresh grants', 'distinct tokens', 'new token', 'time to last ms', 'p50 ms', 'Redis cmds'];
export const stormRows = (trials: StormTrial[]) =>
  trials.map((t) => [t.trial, t.calls, t.ok, t.refreshGrants, t.distinctTokens, t.tokenChanged ? 'yes' : 'NO', t.timeToLastMs.toFixed(1), t.p50Ms.toFixed(1), t.redisCommands]);
