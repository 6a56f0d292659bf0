/**
 * A retried call prints nothing past the logger (found by review). Each upstream attempt adds
 * httpxy's and HPM's 'close' listeners to the browser's answer; with the gateway's own (metering
 * on 'close' since 0.6.8) a call retried after an upstream 401 crossed Node's default bound of
 * 10, and the process printed a MaxListenersExceededWarning to stderr for every such call. A
 * real process, as main.ts starts it: Jest's own process does not show the warning.
 *
 * Mutation that fails it (checked by hand): src/proxy/upstream.ts resend() without its
 * `res.setMaxListeners(...)` line.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { cliOidc, ensureBuilt, killAllCli, startCliGateway, writeConfigFile, type Spawned } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { gatewayClient } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { findFreePort, redisUrlForTests } from '../../support/redis-server.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

let provider: TestProvider;
let upstream: Upstream;
let proc: Spawned;
let url: string;

beforeAll(async () => {
  ensureBuilt();
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-retry-'));
  const port = await findFreePort();
  url = `http://127.0.0.1:${port}`;
  provider = await startTestProvider({ clients: [gatewayClient(url)] });
  upstream = await startUpstream();
  // Refuses every token: each call is tried, renewed once, and tried again.
  upstream.setHandler((req, res) => {
    req.resume();
    res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' }).end();
  });
  const file = writeConfigFile(tmp, 'gw.yaml', {
    server: { port, host: '127.0.0.1', publicUrl: url },
    oidc: cliOidc(provider.issuer),
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `retry${port}:` },
    routes: [{ path: '/api', target: upstream.url, auth: 'user' }],
    log: { level: 'warn' },
  });
  proc = await startCliGateway(file, port);
}, 200_000);

afterAll(async () => {
  killAllCli();
  await upstream?.close();
  await provider?.close();
});

it('retries a call after an upstream 401 without a MaxListenersExceededWarning on stderr', async () => {
  const client = new BrowserClient();
  await signIn(client, url);
  for (const id of [1, 2, 3]) expect((await client.get(`${url}/api/orders/${id}`, { headers: { 'x-csrf': '1' } })).status).toBe(401);
  // A retry did happen (renewals are at most one per cooldown, so not one per call).
  expect(upstream.requests.length).toBeGreaterThan(3);
  // A warning is written on the tick after the listener is added: the health probe comes after it.
  expect((await client.get(`${url}/healthz`)).status).toBe(200);
  expect(proc.output()).not.toContain('MaxListenersExceededWarning');
}, 60_000);
