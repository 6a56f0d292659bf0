/**
 * registry.rivals (session/succession.ts): the sessions other sign-ins of one browser made, which a
 * new sign-in overwrites in the browser. Two callbacks at once carry each other's login cookies;
 * whatever the interleaving of their Redis steps, exactly one finds the other. Over the demo's
 * in-memory Redis, whose commands interleave at every await, as two requests' do.
 *
 * Fails if, in rivals, the step per pair is skipped (its `consider(await redis.eval(SUCCEED,
 * ...))` removed): both read the other's note before it was written, and found nothing.
 */
import { randomBytes } from 'node:crypto';
import { createSealer } from '../../../src/crypto/seal.js';
import { createKeys, digest } from '../../../src/redis/keys.js';
import { createMemoryRedis } from '../../../src/redis/memory.js';
import { createSessionRecords } from '../../../src/session/records.js';
import { createRevocationOutbox } from '../../../src/session/revocation-outbox.js';
import { createSessionRegistry } from '../../../src/session/registry.js';

function registry() {
  const redis = createMemoryRedis();
  const keys = createKeys(`rivals-${randomBytes(4).toString('hex')}:`);
  const base = { keys, idleTimeoutSeconds: 600, absoluteTimeoutSeconds: 3600 };
  const sealer = createSealer([randomBytes(32).toString('base64')]);
  const records = createSessionRecords({ ...base, redis, sealer });
  return createSessionRegistry({ ...base, redis, records, outbox: createRevocationOutbox({ redis, keys, sealer, leaseMs: 60_000, keptMs: 600_000 }) });
}

const [tabA, tabB, tabC] = ['a', 'b', 'c'].map((t) => digest(`login cookie ${t}`)) as [string, string, string];
const [sessionA, sessionB] = [digest('session a'), digest('session b')];
const alice = digest('alice');

describe('registry.rivals', () => {
  it('of two sign-ins completing at once, exactly one finds the other', async () => {
    const r = registry();
    const [foundByA, foundByB] = await Promise.all([r.rivals(tabA, [tabB], sessionA, alice), r.rivals(tabB, [tabA], sessionB, alice)]);
    // Each may find only the other's session, and exactly one of them does.
    expect(foundByA.filter((s) => s !== sessionB)).toEqual([]);
    expect(foundByB.filter((s) => s !== sessionA)).toEqual([]);
    expect(foundByA.length + foundByB.length).toBe(1);
  });

  it('a sign-in completing after another finds it through the note left for it', async () => {
    const r = registry();
    expect(await r.rivals(tabA, [tabB, tabC], sessionA, alice)).toEqual([]);
    // B's callback no longer carries A's login cookie (A's answer cleared it).
    expect(await r.rivals(tabB, [tabC], sessionB, alice)).toEqual([sessionA]);
  });

  it("finds nothing of another user's", async () => {
    const r = registry();
    await r.rivals(tabA, [tabB], sessionA, digest('mallory'));
    expect(await r.rivals(tabB, [tabA], sessionB, alice)).toEqual([]);
  });
});
