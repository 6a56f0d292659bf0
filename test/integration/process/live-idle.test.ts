/**
 * The idle timeout of a session whose streams are held on another instance (issue 16): no
 * instance sees an idle timeout happen, and nothing polls. Process A holds the session's
 * /auth/events stream; the session is kept busy through process B for longer than the idle
 * timeout, so A's first local deadline finds it alive (one PTTL) and moves; once the calls stop,
 * the key expires in Redis and A closes the stream at its next deadline with
 * `signed-out { reason: expired }`.
 *
 * Mutation check (done by hand once): src/session/held.ts, checkIdle(): `remaining === undefined`
 * → `remaining !== undefined` → A closes the busy session at its first deadline: "stays open
 * while B keeps it busy" fails.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BrowserClient } from '../../support/browser-client.js';
import { cliOidc, ensureBuilt, request, reserveCliPair, startCliPair, stopCli, type Spawned } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { signIn } from '../../support/drive-login.js';
import { gatewayClient } from '../../support/gateway.js';
import { openStream } from '../../support/live-streams.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { redisUrlForTests } from '../../support/redis-server.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { withTimeout } from '../../support/wait.js';

const IDLE_SECONDS = 6;

let tmp: string;
let provider: TestProvider;
let upstream: Upstream;
let publicUrl: string;
let portA: number;
let portB: number;
let processes: Spawned[] = [];

beforeAll(async () => {
  ensureBuilt();
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-live-idle-'));
  upstream = await startUpstream();
  ({ portA, portB, publicUrl } = await reserveCliPair());
  provider = await startTestProvider({ clients: [gatewayClient(publicUrl)] });
  ({ processes } = await startCliPair(tmp, { portA, portB, publicUrl }, {
    oidc: cliOidc(provider.issuer),
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()], idleTimeoutSeconds: IDLE_SECONDS, absoluteTimeoutSeconds: 600 },
    redis: { url: redisUrlForTests(), keyPrefix: `liveidle${portA}:` },
    routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
    log: { level: 'info' },
  }));
}, 200_000);

afterAll(async () => {
  await stopCli(processes);
  await provider?.close();
  await upstream?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('the idle timeout of a session held on another instance', () => {
  it('stays open while B keeps it busy past A\'s first deadline, then closes with expired once idle', async () => {
    const client = new BrowserClient();
    await signIn(client, publicUrl);
    const cookie = Object.entries(client.cookies(publicUrl))
      .map(([n, v]) => `${n}=${v}`)
      .join('; ');
    const events = await openStream(`${publicUrl}/auth/events`, { cookie });
    expect(events.status).toBe(200);
    const heldSince = performance.now();

    // Calls through B slide the idle TTL in Redis for 2 idle periods; A never sees them.
    while (performance.now() - heldSince < IDLE_SECONDS * 2 * 1000) {
      const res = await request(portB, '/api/echo', { cookie, 'x-csrf': '1' });
      expect(res.status).toBe(200);
      expect(events.isClosed()).toBe(false);
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(events.isClosed()).toBe(false);

    // Now idle: the key expires IDLE_SECONDS after the last call, and A's deadline follows it.
    const event = await events.waitForEvent('signed-out', (IDLE_SECONDS * 2 + 15) * 1000);
    expect(JSON.parse(event.data)).toEqual({ reason: 'expired' });
    expect((await withTimeout(events.closed, 10_000, 'the stream to end')).complete).toBe(true);
  }, 90_000);
});
