/**
 * `session.absoluteTimeoutSeconds` changed while sessions live (a roll: instances with the old
 * and the new value side by side, test/support/roll.ts). A session keeps the end it was given
 * at sign-in, or a sooner one once the timeout is shortened: a lengthened timeout never
 * stretches it. Stretched, it outlived its browser cookie (set with the old lifetime) and its
 * index entries (written with it): a copied cookie worked on, missing from the sessions list
 * and untouched by a back-channel logout (found by red team).
 *
 * Mutation that fails this file (checked by hand): src/session/data.ts sessionEndsAt returning
 * `configured` alone (`return configured;`): the lengthened case.
 */
import { callVia, signInVia, startRoll, type Roll } from '../../support/roll.js';

let roll: Roll;
beforeAll(async () => {
  const routes = (upstream: string) => [{ path: '/api', target: upstream, auth: 'user' as const }];
  // Idle timeouts longer than the test clock moves: only the absolute timeout ends anything.
  roll = await startRoll({
    old: (up) => ({ session: { idleTimeoutSeconds: 60, absoluteTimeoutSeconds: 120 }, tokens: { refreshSkewSeconds: 0 }, routes: routes(up) }),
    new: (up) => ({ session: { idleTimeoutSeconds: 60, absoluteTimeoutSeconds: 3600 }, tokens: { refreshSkewSeconds: 0 }, routes: routes(up) }),
  });
}, 60_000);
afterAll(async () => {
  await roll?.close();
});

it('a session signed in under the shorter timeout ends at it on an instance with the longer one', async () => {
  const alice = await signInVia(roll, 'old', 'alice');
  expect((await callVia(roll, 'new', alice)).status).toBe(200);
  roll.clock.advance(121);
  expect((await callVia(roll, 'new', alice)).status).toBe(401);
});

it('a session signed in under the longer timeout ends at the shorter one on an instance with it', async () => {
  const bob = await signInVia(roll, 'new', 'bob');
  roll.clock.advance(121);
  expect((await callVia(roll, 'old', bob)).status).toBe(401);
});

it('and lives its own length on the instance that gave it', async () => {
  const carol = await signInVia(roll, 'new', 'carol');
  roll.clock.advance(121);
  expect((await callVia(roll, 'new', carol)).status).toBe(200);
});
