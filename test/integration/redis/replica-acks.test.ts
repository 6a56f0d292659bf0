/**
 * redis/replica-acks.ts on a real Sentinel set (the failovers themselves:
 * reliability/sentinel-lost-writes and sentinel-unpromotable-replica). Found by review: every
 * WAIT blocks the connection it is sent on, so ends asked at once queued on the server, 500 ms
 * each, and each caller was let go only by the command deadline. Calls under way now share one
 * round, so a burst costs at most two WAITs.
 *
 * Mutation that fails it (checked by hand): acknowledged() starting a round per call
 * (`if (inFlight === undefined)` → `if (true)`).
 */
import { createReplicaAcks } from '../../../src/redis/replica-acks.js';
import { closeRedis, connectRedis, createRedis, type RedisClient } from '../../../src/redis/client.js';
import { adminCall, startRedisSentinel, type RedisSentinelSet } from '../../support/redis-sentinel.js';

let set: RedisSentinelSet;
let client: RedisClient;

beforeAll(async () => {
  set = await startRedisSentinel({ gatedReplication: true });
  client = createRedis({ sentinel: { name: set.name, nodes: set.nodes }, commandTimeoutMs: 3000, keyPrefix: 'acks:' });
  await connectRedis(client, 10_000);
}, 90_000);

afterAll(async () => {
  if (client) await closeRedis(client);
  await set?.close();
});

/** WAIT commands the master has run so far. */
async function waits(): Promise<number> {
  const stats = String(await adminCall(set.master.port, 'INFO', 'commandstats'));
  return Number(/cmdstat_wait:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

it('asks the replica once for a burst of writes, and answers each', async () => {
  const acks = createReplicaAcks(client, 'acks:mark');
  if (!acks) throw new Error('a Sentinel client has replica acknowledgements');
  try {
    await client.set('acks:x', '1');
    expect(await acks.acknowledged(500)).toBe(true);
    const before = await waits();
    const answers = await Promise.all(Array.from({ length: 10 }, () => acks.acknowledged(500)));
    expect(answers).toEqual(Array.from({ length: 10 }, () => true));
    expect((await waits()) - before).toBeLessThanOrEqual(2);

    // The replica cut off: nothing is acknowledged.
    set.replicationGate?.shut();
    await client.set('acks:y', '1');
    expect(await acks.acknowledged(200)).toBe(false);
  } finally {
    set.replicationGate?.open();
    acks.close();
  }
}, 60_000);
