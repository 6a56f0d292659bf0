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
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { cliOidc, startCliGateway, useCliFixture, writeConfigFile, type Spawned } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { redisUrlForTests } from '../../support/redis-server.js';
import { sessionIdFromCookie } from '../../support/assertions.js';
import { findSecrets } from '../../support/secrets.js';

const cli = useCliFixture('debug');
let proc: Spawned;

beforeAll(async () => {
  const file = writeConfigFile(cli.tmp, 'gw.yaml', {
    server: { port: cli.port, host: '127.0.0.1', publicUrl: cli.url },
    oidc: cliOidc(cli.provider.issuer),
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `debug${cli.port}:` },
    routes: [],
    log: { level: 'info' },
  });
  proc = await startCliGateway(file, cli.port, { DEBUG: '*' });
}, 200_000);

it('with DEBUG=* set, a sign-in writes no code, state, session cookie or session ID to the process output', async () => {
  const client = new BrowserClient();
  const { callbackUrl } = await signIn(client, cli.url);
  const cookie = client.cookies(cli.url).bff as string;
  expect(cookie).toEqual(expect.any(String));
  expect((await client.get(`${cli.url}/auth/user`, { headers: { 'x-csrf': '1' } })).status).toBe(200);
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
