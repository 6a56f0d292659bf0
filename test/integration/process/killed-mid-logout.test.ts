/**
 * A gateway process killed (SIGKILL, OOM, a node lost) while a logout waits for the provider's
 * revocation (found by the workers red team). The logout had taken the record and deleted its
 * kept copy before revoking: the browser got no answer and still held its cookie, and its retry,
 * on another process, found nothing, revoked nothing and sent no one to the provider's logout
 * (`logoutUrl: "/"`). The provider's tokens stayed valid, held by no one, and its session open.
 * The copy is now kept until the tokens are revoked, so the retry reclaims it.
 *
 * Mutation that fails this file (by hand, once): src/session/records.ts remove deleting the kept
 * copy with the record (`redis.del(keys.session(digest), keys.takenRecord(digest))`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BrowserClient } from '../../support/browser-client.js';
import { cliOidc, ensureBuilt, reserveCliPair, startCliPair, stopCli, type Spawned } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { signIn } from '../../support/drive-login.js';
import { gatewayClient } from '../../support/gateway.js';
import type { TestProvider } from '../../support/oidc-provider.js';
import { startFrontedProvider, startProviderFront, type ProviderFront } from '../../support/provider-front.js';
import { rawExchange } from '../../support/raw-http.js';
import { redisUrlForTests } from '../../support/redis-server.js';
import { withTimeout } from '../../support/wait.js';

let tmp: string;
let front: ProviderFront;
let provider: TestProvider;
let processes: Spawned[] = [];
let ports: Awaited<ReturnType<typeof reserveCliPair>>;

beforeAll(async () => {
  ensureBuilt();
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-killed-logout-'));
  ports = await reserveCliPair();
  front = await startProviderFront();
  provider = await startFrontedProvider(front, { clients: [gatewayClient(ports.publicUrl)] });
  ({ processes } = await startCliPair(tmp, ports, {
    oidc: cliOidc(provider.issuer),
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `killedlogout${ports.portA}:` },
    log: { level: 'info' },
  }));
}, 200_000);

afterAll(async () => {
  await stopCli(processes);
  await provider?.close();
  await front?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const isRevocation = (p: string) => p.includes('revocation') || p.includes('revoke');

it('the retried logout, on another process, revokes the tokens and ends the provider session', async () => {
  const client = new BrowserClient();
  await signIn(client, ports.publicUrl, { user: 'alice', password: 'alice-password' });
  const cookie = Object.entries(client.cookies(ports.publicUrl))
    .map(([name, value]) => `${name}=${value}`)
    .join('; ');
  const headers = { cookie, 'x-csrf': '1' };

  // A's revocations never reach the provider: A is killed while it waits for them.
  const revoking: string[] = [];
  front.intercept(async (req) => {
    if (!isRevocation(req.path)) return undefined;
    revoking.push(req.form.get('token') ?? '');
    await withTimeout(processes[0]!.exited, 20_000, 'A killed', { fallback: undefined });
    return { status: 502, reset: true };
  });
  const first = rawExchange(`http://127.0.0.1:${ports.portA}`, { method: 'POST', target: '/auth/logout', headers, deadlineMs: 20_000 }).catch((err: Error) => err);
  await front.waitFor((req) => isRevocation(req.path), 1, 10_000);
  processes[0]!.child.kill('SIGKILL');
  // The browser heard nothing: it still holds its cookie, and asks again.
  expect(await first).toBeInstanceOf(Error);
  front.intercept(undefined);

  const retry = await rawExchange(`http://127.0.0.1:${ports.portB}`, { method: 'POST', target: '/auth/logout', headers, deadlineMs: 20_000 });
  expect(retry.status).toBe(200);
  const logoutUrl = new URL((JSON.parse(retry.text) as { logoutUrl: string }).logoutUrl, ports.publicUrl);
  expect(logoutUrl.origin).toBe(new URL(provider.issuer).origin);
  expect(logoutUrl.searchParams.get('id_token_hint')).toMatch(/^ey/);
  expect(revoking.length).toBeGreaterThan(0);
  for (const token of revoking) expect((await provider.introspect(token)).active).toBe(false);
  // Released once revoked: a third logout is one without a session.
  const third = await rawExchange(`http://127.0.0.1:${ports.portB}`, { method: 'POST', target: '/auth/logout', headers, deadlineMs: 20_000 });
  expect(JSON.parse(third.text)).toEqual({ logoutUrl: '/' });
}, 90_000);
