/**
 * unreplicated-writes.ts as pure logic (the failover itself: test/integration/reliability/
 * sentinel-lost-writes.test.ts): a write a replica acknowledged is forgotten at once; one it
 * did not is made again after each reconnect, until a WAIT through the connection it was last
 * made on confirms it; a write is given up after keepMs.
 *
 * Mutations that fail this file (checked by hand): recheck() clearing every remembered write on
 * an acknowledgement (`write.appliedOn === on` made `true`); confirm() without `|| closed`.
 */
import { createUnreplicatedWrites } from '../../../src/session/unreplicated-writes.js';
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

it('forgets an acknowledged write; makes an unacknowledged one again after a reconnect, until confirmed there', async () => {
  const acks = fakeAcks();
  const made: string[] = [];
  const writes = createUnreplicatedWrites({ acks, waitMs: 10, recheckMs: 5 });
  acks.answer = true;
  await writes.confirm('end a', async () => made.push('a'));
  expect(writes.pending).toBe(0);

  acks.answer = false;
  await writes.confirm('end b', async () => made.push('b'));
  expect(writes.pending).toBe(1);
  acks.reconnect();
  await eventually('made again', 2_000, async () => made.length === 1);
  expect(made).toEqual(['b']);
  acks.answer = true;
  await eventually('confirmed and forgotten', 2_000, async () => writes.pending === 0);
  writes.close();
});

it('keeps a write made through an earlier connection when only the later one is acknowledged', async () => {
  const acks = fakeAcks();
  let fail = true;
  const writes = createUnreplicatedWrites({ acks, waitMs: 10, recheckMs: 5 });
  await writes.confirm('tokens c', async () => {
    if (fail) throw new Error('Redis away');
  });
  acks.reconnect(); // made again, and failed: not made on this connection
  acks.answer = true;
  const asked = acks.asked;
  await eventually('rechecked twice', 2_000, async () => acks.asked >= asked + 2);
  expect(writes.pending).toBe(1);
  fail = false;
  acks.reconnect();
  await eventually('confirmed once made', 2_000, async () => writes.pending === 0);
  writes.close();
});

it('keeps the latest write of a key, and gives a write up after keepMs', async () => {
  const acks = fakeAcks();
  const made: string[] = [];
  const writes = createUnreplicatedWrites({ acks, waitMs: 10, recheckMs: 5, keepMs: 200 });
  await writes.confirm('tokens d', async () => made.push('first'));
  await writes.confirm('tokens d', async () => made.push('second'));
  expect(writes.pending).toBe(1);
  acks.reconnect();
  await eventually('made again', 2_000, async () => made.length === 1);
  expect(made).toEqual(['second']);
  await eventually('given up', 2_000, async () => writes.pending === 0);
  writes.close();
});

// A confirm() waiting when close() ran remembered its write after it, and asked the closed
// connection every recheckMs for keepMs (found by review).
it('remembers nothing once closed, a confirm under way included', async () => {
  let answer!: (acknowledged: boolean) => void;
  const writes = createUnreplicatedWrites({
    acks: { acknowledged: () => new Promise<boolean>((resolve) => (answer = resolve)), onReconnect: () => () => undefined },
    waitMs: 10,
    recheckMs: 5,
  });
  const confirming = writes.confirm('end e', async () => undefined);
  writes.close();
  answer(false);
  await confirming;
  expect(writes.pending).toBe(0);
});
