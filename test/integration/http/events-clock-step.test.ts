/**
 * `session-ending` after a forward step of the host's clock (a VM resumed, an NTP step): the
 * notice's timer counts elapsed time, so a step that brought the absolute timeout within the
 * notice window left the SPA untold until the timer's own time came, possibly after the session
 * had ended (left in 0.6.8; held.ts already swept `signed-out` for such a step). The stream's
 * heartbeat now sends a notice that the gateway's clock says is due.
 *
 * Fails if src/http/events-route.ts's heartbeat does not send due notices (its loop over
 * `notices` removed).
 */
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { createTestClock } from '../../support/gateway.js';
import { openStream, type HeldStream } from '../../support/live-streams.js';
import { startStack, type Stack } from '../../support/stack.js';

const LIFETIME = 3600;
const clock = createTestClock();
let stack: Stack;
let stream: HeldStream | undefined;

beforeAll(async () => {
  stack = await startStack({
    clock,
    app: { eventStream: { heartbeatMs: 200 } },
    config: { session: { absoluteTimeoutSeconds: LIFETIME, idleTimeoutSeconds: LIFETIME } },
  });
}, 60_000);

afterAll(async () => {
  stream?.destroy();
  await stack?.close();
});

it('sends session-ending within a heartbeat once a clock step brings the absolute timeout within the notice window', async () => {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  const name = stack.config.derived.sessionCookieName;
  stream = await openStream(`${stack.gateway.url}/auth/events`, { cookie: `${name}=${client.cookies(stack.gateway.url)[name] as string}`, 'sec-fetch-site': 'same-origin' });
  expect(stream.status).toBe(200);
  // 200 s left: inside the default 300 s notice window, far from the session's end.
  clock.advance(LIFETIME - 200);
  const ending = JSON.parse((await stream.waitForEvent('session-ending', 10_000)).data) as { secondsLeft: number };
  expect(ending.secondsLeft).toBeGreaterThan(150);
  expect(ending.secondsLeft).toBeLessThanOrEqual(200);
  expect(stream.isClosed()).toBe(false);
});
