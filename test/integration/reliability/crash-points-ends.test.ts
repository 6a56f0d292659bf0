/**
 * Crash points of the ends that revoke (red team: crash-point injection). A flow is counted once
 * (the data commands the gateway sends Redis), then run again for every point N: the gateway
 * process is SIGKILLed as its Nth command reaches Redis (`before`: never run; `after`: run, the
 * answer never seen). A gateway is started again on the same Redis, and the survivor process
 * judges:
 *
 *  - the session ends once its caller tries again (the browser's retried logout, the user's
 *    DELETE of a session still listed, the provider's next logout token);
 *  - the session's refresh token is revoked at the provider: by the retried logout, which
 *    reclaims the kept copy (`taken:`), or by any process's sweep of the revocation outbox once
 *    the lease (1 s here) lapses (session/revocation-outbox.ts);
 *  - no key without a TTL, no token in plaintext, no record with tokens missing from its user's index.
 *
 * Logout runs both modes; DELETE /auth/sessions/{id} and back-channel logout run `after` only
 * (Redis holds after N what it holds before N + 1, so the states are the same, and the suite's
 * time is halved). Before the outbox, both lost the revocation when killed after taking the
 * record: no retry could find it. The sweeps of sign-in and of a refreshing call held at every
 * point; they are not in the suite for its time (about 110 s).
 *
 * Mutations that fail this file (checked by hand, once each):
 * - src/session/records.ts take() never keeping a copy (`endedFor?.keep ? '1' : '0'` → `'0'`):
 *   all three sweeps (the refresh token of an end killed after the take is never revoked).
 * - src/session/registry.ts end(): `how.keep ?? (revokes && !how.again)` → `how.keep ?? false`
 *   (no end journals, or keeps a copy): all three sweeps.
 */
import type { CrashMode } from '../../support/crash-relay.js';
import { call, isLoginRequired, standing, startCrashStack, type CrashStack, type Signed } from '../../support/crash-harness.js';
import { eventually } from '../../support/wait.js';

let stack: CrashStack;
beforeAll(async () => {
  stack = await startCrashStack('ends');
}, 120_000);
afterAll(async () => {
  await stack?.close();
});

const MODES: CrashMode[] = ['before', 'after'];

async function revokedWithin(token: string | undefined, ms: number): Promise<boolean> {
  if (!token) return true;
  try {
    await eventually('revoked', ms, async () => (await stack.provider.introspect(token)).active === false, { intervalMs: 50 });
    return true;
  } catch {
    return false;
  }
}

/** What is wrong with `s` after its end: still standing (`standing` names it), or its refresh token still active after `ms`. */
async function notEnded(s: Signed, stillThere: string, ms: number): Promise<string[]> {
  const found: string[] = [];
  const now = await standing(stack, s.cookie);
  if (now !== 'out') found.push(`${stillThere} ${now}`);
  if (!(await revokedWithin(s.tokens.refreshToken, ms))) found.push('the refresh token is still active at the provider');
  return found;
}

const label = (flow: string, mode: CrashMode, at: number, command: string[] | undefined) =>
  `${flow} killed ${mode} command ${at} (${command ? `${command[0]} ${command[1] ?? ''}` : 'not reached'})`;

async function sweep(
  flow: string,
  setup: () => Promise<Signed[]>,
  run: (s: Signed[]) => Promise<unknown>,
  judge: (s: Signed[]) => Promise<string[]>,
  modes: readonly CrashMode[] = MODES,
): Promise<string[]> {
  const probe = await setup();
  const commands = await stack.count(() => run(probe));
  console.log(flow, commands.join(" | "));
  expect(commands.length).toBeGreaterThan(0);
  const problems: string[] = [];
  for (const mode of modes) {
    for (let at = 1; at <= commands.length; at++) {
      const signed = await setup();
      const killed = await stack.killedAt(at, mode, () => run(signed));
      const where = label(flow, mode, at, killed.command);
      for (const p of await judge(signed)) problems.push(`${where}: ${p}`);
      const secrets = signed.flatMap((s) => [s.tokens.accessToken, s.tokens.refreshToken ?? '']);
      for (const p of await stack.audit(secrets)) problems.push(`${where}: ${p}`);
    }
  }
  return problems;
}

it('POST /auth/logout killed at any Redis command: the retried logout ends the session and its refresh token is revoked', async () => {
  const problems = await sweep(
    'logout',
    async () => [await stack.signedIn('alice')],
    ([s]) => call(`${stack.aUrl}/auth/logout`, s!.cookie, 'POST'),
    async ([s]) => {
      const found: string[] = [];
      // The browser heard nothing, kept its cookie, and logs out again (on the other process).
      const retry = await call(`${stack.bUrl}/auth/logout`, s!.cookie, 'POST');
      if (retry.status !== 200) found.push(`the retried logout answered ${retry.status} ${retry.body.slice(0, 100)}`);
      return [...found, ...(await notEnded(s!, 'after the retried logout the browser is', 3_000))];
    },
  );
  expect(problems).toEqual([]);
}, 150_000);

/** The handle of `target` as its user's session list (read by `caller`, on B) shows it. */
async function handleOf(caller: Signed, target: Signed): Promise<string> {
  const list = await call(`${stack.bUrl}/auth/sessions`, caller.cookie);
  const sessions = JSON.parse(list.body) as Array<{ id: string }>;
  const stored = await stack.session(target.digest);
  const handle = stored?.stored.auth?.handle;
  if (!handle || !sessions.some((s) => s.id === handle)) throw new Error(`the target session is not listed: ${list.status} ${list.body.slice(0, 100)}`);
  return handle;
}

it('DELETE /auth/sessions/{id} killed at any Redis command: the session ends and its refresh token is revoked', async () => {
  const handles = new Map<Signed, string>();
  const callers: Signed[] = [];
  const problems = await sweep(
    'DELETE',
    async () => {
      // The list the DELETE reads costs two commands per session: each point starts with the
      // same two, or the points after the first stop short of the take.
      for (const earlier of callers.splice(0)) await call(`${stack.bUrl}/auth/logout`, earlier.cookie, 'POST');
      const caller = await stack.signedIn('alice');
      callers.push(caller);
      const target = await stack.signedIn('alice');
      handles.set(target, await handleOf(caller, target));
      return [caller, target];
    },
    ([caller, target]) => call(`${stack.aUrl}/auth/sessions/${handles.get(target!)}`, caller!.cookie, 'DELETE'),
    async ([caller, target]) => {
      const found: string[] = [];
      // The user, who saw no answer, reloads the list and ends the session again if it is still there.
      if ((await standing(stack, target!.cookie)) === 'in') {
        const retry = await call(`${stack.bUrl}/auth/sessions/${handles.get(target!)}`, caller!.cookie, 'DELETE');
        if (retry.status !== 204) found.push(`the retried DELETE answered ${retry.status} ${retry.body.slice(0, 100)}`);
      }
      const own = await standing(stack, caller!.cookie);
      if (own !== 'in') found.push(`the caller's own session is ${own}`);
      return [...found, ...(await notEnded(target!, 'the ended session is', 8_000))];
    },
    ['after'],
  );
  expect(problems).toEqual([]);
}, 240_000);

it('a back-channel logout killed at any Redis command: the session ends and its refresh token is revoked', async () => {
  const sids = new Map<Signed, string>();
  const logoutToken = (s: Signed) => stack.provider.signLogoutToken({ sub: s.user, sid: sids.get(s) });
  const deliver = async (url: string, s: Signed) => {
    const res = await fetch(`${url}/auth/backchannel-logout`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ logout_token: await logoutToken(s) }),
      signal: AbortSignal.timeout(8_000),
    });
    return { status: res.status, body: await res.text() };
  };
  const problems = await sweep(
    'back-channel logout',
    async () => {
      const s = await stack.signedIn('bob');
      const sid = (await stack.session(s.digest))?.stored.auth?.sid;
      if (!sid) throw new Error('the session has no provider sid');
      sids.set(s, sid);
      return [s];
    },
    ([s]) => deliver(stack.aUrl, s!),
    async ([s]) => {
      const found: string[] = [];
      // The provider heard no answer and delivers again (a token of its own: the first one's jti
      // stays claimed for 30 s, answered 400 as a replay meanwhile).
      const retry = await deliver(stack.bUrl, s!);
      if (retry.status !== 200) found.push(`the provider's next logout answered ${retry.status} ${retry.body.slice(0, 100)}`);
      return [...found, ...(await notEnded(s!, "after the provider's logout the browser is", 8_000))];
    },
    ['after'],
  );
  expect(problems).toEqual([]);
}, 240_000);

it('the sign-out answers seen were in SPEC shape', async () => {
  // A browser that was never signed in reads 401 login_required on the survivor.
  expect(isLoginRequired(await call(`${stack.bUrl}/auth/user`, undefined))).toBe(true);
});
