/**
 * The floors under the gateway (issue 17; servers/floor.ts): http-proxy-middleware alone, its
 * engine called as the gateway calls it, and each (and the raw proxy) with one GETEX per call of
 * a value the size of the gateway's session record. Started the same way by
 * `npm run bench:instructions -- --floors` (under callgrind) and `npm run bench -- --floors`
 * (under load, by throughput).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { startChild, type BenchChild, type StartChildOptions } from './lib/ipc.js';
import type { FloorOptions } from './servers/floor.js';

export const FLOORS = {
  hpm: { engine: 'hpm', getex: false },
  httpxy: { engine: 'httpxy', getex: false },
  'httpxy+getex': { engine: 'httpxy', getex: true },
  'hpm+getex': { engine: 'hpm', getex: true },
  'raw+getex': { engine: 'raw', getex: true },
} as const satisfies Record<string, { engine: FloorOptions['engine']; getex: boolean }>;
export type FloorName = keyof typeof FLOORS;

const floorModule = path.join(path.dirname(fileURLToPath(import.meta.url)), 'servers', 'floor.js');

/** Bytes of the largest value in the bench's Redis: the one session record the sign-in wrote. */
export async function sessionRecordBytes(url: string): Promise<number> {
  const redis = new Redis(url, { lazyConnect: true });
  await redis.connect();
  try {
    let max = 0;
    for (const key of await redis.keys('*')) {
      if ((await redis.type(key)) === 'string') max = Math.max(max, await redis.strlen(key));
    }
    if (max === 0) throw new Error('no session record in Redis after the sign-in');
    return max;
  } finally {
    redis.disconnect();
  }
}

export interface FloorsInput {
  names: readonly FloorName[];
  host: string;
  upstream: string;
  /** The bench's Redis, where the gateway's one sign-in has written its session record. */
  redisUrl: string;
  env?: NodeJS.ProcessEnv;
  /** Extra start options per floor (e.g. valgrind's execPath and flags). */
  startAs?: (name: string) => Partial<StartChildOptions>;
}

/** Starts the named floors, each a child process; their GETEX reads `valueBytes` bytes. */
export async function startFloors(input: FloorsInput): Promise<{ floors: BenchChild<{ url: string }>[]; valueBytes: number }> {
  const valueBytes = await sessionRecordBytes(input.redisUrl);
  const floors = await Promise.all(
    input.names.map((name) => {
      const { engine, getex } = FLOORS[name];
      const options: FloorOptions = { host: input.host, upstream: input.upstream, engine, ...(getex ? { redisUrl: input.redisUrl, valueBytes } : {}) };
      return startChild<{ url: string }>({ name, ...(input.env ? { env: input.env } : {}), ...input.startAs?.(name), module: floorModule, options });
    }),
  );
  return { floors, valueBytes };
}
