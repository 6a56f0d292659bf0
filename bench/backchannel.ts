/**
 * `npm run bench:backchannel`: how long a back-channel logout by `sub` takes to end one user's
 * sessions in Redis (session/provider-logouts.ts endByUser, through the real registry and
 * journal), while the provider waits for its answer. Each end is about half a dozen round trips
 * (the user check, the journal's entry, the take, the index entries, the announcement), so the
 * time is round trips × sessions ÷ the ends run at once; `--rtt` puts a relay that delays each
 * direction by half of it between the gateway and Redis, as a network would. Node's timers wait
 * at least 1 ms, so any `--rtt` adds at least 2 ms: the round trip measured (PING, median of
 * 50) is what the result names.
 *
 *   --sessions N   sessions of the one user (default 1000)
 *   --rtt MS       added round-trip time (default 0: loopback)
 *   --rounds N     rounds, each on fresh sessions (default 3); the median is reported
 *
 * A real redis-server of its own on a free port; nothing else.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { createSealer } from '../src/crypto/seal.js';
import { createKeys, digest } from '../src/redis/keys.js';
import { createSessionRecords } from '../src/session/records.js';
import { createSessionRegistry, ENDED_MEMORY_SECONDS } from '../src/session/registry.js';
import { createRevocationOutbox } from '../src/session/revocation-outbox.js';
import type { AuthData } from '../src/session/data.js';
import { startRedisServer } from '../test/support/redis-server.js';
import { positiveFlag } from './lib/args.js';
import { median } from './lib/stats.js';

const argv = process.argv.slice(2);
const sessions = positiveFlag(argv, '--sessions', 1000, 'integer');
const rounds = positiveFlag(argv, '--rounds', 3, 'integer');
const rtt = argv.includes('--rtt') ? positiveFlag(argv, '--rtt', 1, 'number') : 0;

/** A TCP relay that holds each chunk for `ms` in each direction. */
async function delayingRelay(port: number, ms: number): Promise<{ port: number; close(): void }> {
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    const later = (to: net.Socket) => (chunk: Buffer) => void setTimeout(() => to.write(chunk), ms);
    client.on('data', later(upstream));
    upstream.on('data', later(client));
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', drop).on('error', drop);
    upstream.on('close', drop).on('error', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() };
}

const redisServer = await startRedisServer();
const relay = rtt > 0 ? await delayingRelay(redisServer.port, rtt / 2) : undefined;
const redis = new Redis({ host: '127.0.0.1', port: relay?.port ?? redisServer.port, lazyConnect: false });
try {
  const pings: number[] = [];
  for (let i = 0; i < 50; i++) {
    const t = performance.now();
    await redis.ping();
    pings.push(performance.now() - t);
  }
  const timings: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const keys = createKeys(`bench${randomBytes(3).toString('hex')}:`);
    const sealer = createSealer([randomBytes(32).toString('base64')]);
    const base = { keys, idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600 };
    const records = createSessionRecords({ ...base, redis, sealer });
    const outbox = createRevocationOutbox({ redis, keys, sealer, leaseMs: 60_000, keptMs: ENDED_MEMORY_SECONDS * 1000 });
    const registry = createSessionRegistry({ ...base, redis, records, outbox });
    await Promise.all(
      Array.from({ length: sessions }, async (_, i) => {
        const d = digest(`${round} ${i} ${randomBytes(8).toString('hex')}`);
        const auth: AuthData = { handle: `h${i}`, sub: 'alice', iss: 'https://idp.example', sid: `sid-${i}`, claims: {}, scopes: ['openid'], createdAt: Date.now() };
        await records.write(d, { tokens: { v: 1, sealed: 'v1.k.iv.ct' }, auth, cookie: { path: '/' } });
        await registry.register(d, auth, 'saved');
      }),
    );
    const t0 = performance.now();
    const ended = await registry.endByUser('https://idp.example', 'alice');
    timings.push(performance.now() - t0);
    if (ended.length !== sessions) throw new Error(`ended ${ended.length} of ${sessions}`);
  }
  console.log(
    `back-channel logout by sub of ${sessions} sessions, Redis round trip ${median(pings).toFixed(2)} ms: median ${median(timings).toFixed(0)} ms ` +
      `(rounds: ${timings.map((t) => t.toFixed(0)).join(', ')} ms)`,
  );
} finally {
  redis.disconnect();
  relay?.close();
  await redisServer.close();
}
