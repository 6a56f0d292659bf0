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
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { cliOidc, startCliGateway, useCliFixture, writeConfigFile, type Spawned } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { redisUrlForTests } from '../../support/redis-server.js';

const cli = useCliFixture('retry');
let proc: Spawned;

beforeAll(async () => {
  // Refuses every token: each call is tried, renewed once, and tried again.
  cli.upstream.setHandler((req, res) => {
    req.resume();
    res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' }).end();
  });
  const file = writeConfigFile(cli.tmp, 'gw.yaml', {
    server: { port: cli.port, host: '127.0.0.1', publicUrl: cli.url },
    oidc: cliOidc(cli.provider.issuer),
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `retry${cli.port}:` },
    routes: [{ path: '/api', target: cli.upstream.url, auth: 'user' }],
    log: { level: 'warn' },
  });
  proc = await startCliGateway(file, cli.port);
}, 200_000);

it('retries a call after an upstream 401 without a MaxListenersExceededWarning on stderr', async () => {
  const client = new BrowserClient();
  await signIn(client, cli.url);
  for (const id of [1, 2, 3]) expect((await client.get(`${cli.url}/api/orders/${id}`, { headers: { 'x-csrf': '1' } })).status).toBe(401);
  // A retry did happen (renewals are at most one per cooldown, so not one per call).
  expect(cli.upstream.requests.length).toBeGreaterThan(3);
  // A warning is written on the tick after the listener is added: the health probe comes after it.
  expect((await client.get(`${cli.url}/healthz`)).status).toBe(200);
  expect(proc.output()).not.toContain('MaxListenersExceededWarning');
}, 60_000);
