/**
 * unreplicated-ends.ts as pure logic (the failover itself: test/integration/reliability/
 * sentinel-lost-ends.test.ts): an end a replica acknowledged is forgotten at once; one it did
 * not is applied again after each reconnect, until a WAIT through the connection it was last
 * applied on confirms it; an end is given up after keepMs.
 *
 * Mutation that fails this file (checked by hand): recheck() clearing every remembered end on
 * an acknowledgement (`end.appliedOn === on` made `true`).
 */
import { createUnreplicatedEnds } from '../../../src/session/unreplicated-ends.js';
import { eventually } from '../../support/wait.js';

function fakeAcks() {
  const listeners = new Set<() => void>();
  return {
    answer: false,
    asked: 0,
    async acknowledged() {
      this.asked += 1;
      return this.answer;
    },
    onReconnect(listener: () => void) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    reconnect: () => listeners.forEach((l) => l()),
  };
}

it('forgets an acknowledged end; applies an unacknowledged one again after a reconnect, until confirmed there', async () => {
  const acks = fakeAcks();
  const reapplied: string[] = [];
  const ends = createUnreplicatedEnds({ acks, waitMs: 10, recheckMs: 5, reapply: async (d, reason, revokes) => void reapplied.push(`${d} ${reason} ${revokes}`) });
  acks.answer = true;
  await ends.confirm('a', 'logout', true);
  expect(ends.pending).toBe(0);

  acks.answer = false;
  await ends.confirm('b', 'provider-logout', true);
  expect(ends.pending).toBe(1);
  acks.reconnect();
  await eventually('reapplied', 2_000, async () => reapplied.length === 1);
  expect(reapplied).toEqual(['b provider-logout true']);
  acks.answer = true;
  await eventually('confirmed and forgotten', 2_000, async () => ends.pending === 0);
  ends.close();
});

it('keeps an end applied through an earlier connection when only the later one is acknowledged', async () => {
  const acks = fakeAcks();
  let failReapply = true;
  const ends = createUnreplicatedEnds({
    acks,
    waitMs: 10,
    recheckMs: 5,
    reapply: async () => {
      if (failReapply) throw new Error('Redis away');
    },
  });
  await ends.confirm('c', 'logout', true);
  acks.reconnect(); // its reapplying fails: not applied on this connection
  acks.answer = true;
  const asked = acks.asked;
  await eventually('rechecked twice', 2_000, async () => acks.asked >= asked + 2);
  expect(ends.pending).toBe(1);
  failReapply = false;
  acks.reconnect();
  await eventually('confirmed once applied', 2_000, async () => ends.pending === 0);
  ends.close();
});

it('gives an end up after keepMs', async () => {
  const acks = fakeAcks();
  const ends = createUnreplicatedEnds({ acks, waitMs: 10, recheckMs: 5, keepMs: 20, reapply: async () => undefined });
  await ends.confirm('d', 'logout', true);
  expect(ends.pending).toBe(1);
  await eventually('given up', 2_000, async () => ends.pending === 0);
  ends.close();
});
