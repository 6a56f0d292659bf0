/**
 * The process's output under `DEBUG=*`, the Node ecosystem's usual troubleshooting switch (the
 * `debug` package, read by express's router, express-session, finalhandler...), found by red
 * team. The gateway's logger redacts at every level, but those libraries write straight to
 * stderr, past it: the router printed every request URL (`dispatching GET
 * /auth/callback?code=…&state=…`) and express-session the session ID it fetched and the whole
 * signed session cookie it set, a working credential for whoever reads the logs. cli.ts unsets
 * DEBUG before any of them loads.
 *
 * Mutation that fails it (checked by hand): src/cli.ts without `delete process.env.DEBUG;`.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { ensureBuilt, killAllCli, startCliGateway, writeConfigFile, type Spawned } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { gatewayClient } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { findFreePort, redisUrlForTests } from '../../support/redis-server.js';
import { sessionIdFromCookie } from '../../support/assertions.js';
import { findSecrets } from '../../support/secrets.js';

let provider: TestProvider;
let proc: Spawned;
let url: string;

beforeAll(async () => {
  ensureBuilt();
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-debug-'));
  const port = await findFreePort();
  url = `http://127.0.0.1:${port}`;
  provider = await startTestProvider({ clients: [gatewayClient(url)] });
  const file = writeConfigFile(tmp, 'gw.yaml', {
    server: { port, host: '127.0.0.1', publicUrl: url },
    oidc: { issuer: provider.issuer, clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef', scopes: ['openid', 'profile', 'offline_access'] },
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `debug${port}:` },
    routes: [],
    log: { level: 'info' },
  });
  proc = await startCliGateway(file, port, { DEBUG: '*' });
}, 200_000);

afterAll(async () => {
  killAllCli();
  await provider?.close();
});

it('with DEBUG=* set, a sign-in writes no code, state, session cookie or session ID to the process output', async () => {
  const client = new BrowserClient();
  const { callbackUrl } = await signIn(client, url);
  const cookie = client.cookies(url).bff as string;
  expect(cookie).toEqual(expect.any(String));
  expect((await client.get(`${url}/auth/user`, { headers: { 'x-csrf': '1' } })).status).toBe(200);
  const query = new URL(callbackUrl).searchParams;
  const secrets = { 'session cookie': cookie, 'authorization code': query.get('code') ?? undefined, state: query.get('state') ?? undefined, 'session ID': sessionIdFromCookie(cookie) };
  const output = proc.output();
  for (const line of output.split('\n')) {
    if (findSecrets(line, secrets).length === 0) continue;
    let masked = line;
    for (const [name, value] of Object.entries(secrets)) if (value) masked = masked.split(value).join(`<${name}>`);
    console.log(`leaking stderr line: ${masked.slice(0, 300)}`);
  }
  expect(findSecrets(output, secrets)).toEqual([]);
}, 60_000);
