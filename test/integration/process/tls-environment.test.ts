/**
 * NODE_TLS_REJECT_UNAUTHORIZED=0 in a gateway process's environment makes Node accept any
 * certificate (found by the TLS red team: an impostor provider was sent the client secret and
 * the code, an impostor WebSocket upstream a user's token). The CLI refuses it at startup
 * (config/cli-check.test.ts). Here, a process that embeds the gateway (src/index.ts) with a
 * config parsed from a map of its own: createRuntime refuses it too (found by review), and a
 * variable set only after startup still reaches no impostor through a WebSocket route. The
 * variable is seen only by a real process (Jest's process.env is a copy): the gateway runs in a
 * child that embeds it.
 *
 * Mutations that fail this file (by hand, once): src/runtime.ts without
 * `refuseUnsafeProcessEnvironment();` → the first test (the impostor provider is asked for its
 * metadata); src/proxy/websocket-tunnel.ts without `rejectUnauthorized: true` → the second.
 */
import { spawn, type ChildProcess } from 'node:child_process';

import https from 'node:https';
import path from 'node:path';
import { ensureBuilt } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { listenOnLoopback } from '../../support/listen.js';
import { rawUpgrade } from '../../support/raw-http.js';
import { findFreePort, redisUrlForTests } from '../../support/redis-server.js';
import { makeSelfSignedCertificate } from '../../support/tls-cert.js';
import { eventually, withTimeout } from '../../support/wait.js';

/** The host program (test/support/embedded-gateway.mjs), run from the repository root. */
const EMBEDDING_SCRIPT = path.resolve('test/support/embedded-gateway.mjs');
/** An https server whose certificate nobody trusts (it signs itself, and no test gives it to Node). */
let impostor: https.Server;
let impostorUrl: string;
const asked: string[] = [];
const children: ChildProcess[] = [];

beforeAll(async () => {
  ensureBuilt();
  impostor = https.createServer(makeSelfSignedCertificate(), (req, res) => {
    asked.push(`${req.method} ${req.url}`);
    res.writeHead(404).end();
  });
  impostor.on('upgrade', (req, socket) => {
    asked.push(`UPGRADE ${req.url}`);
    socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
  });
  impostorUrl = `https://localhost:${await listenOnLoopback(impostor)}`;
}, 60_000);

afterEach(() => {
  asked.length = 0;
});

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  impostor?.closeAllConnections();
  await new Promise((resolve) => impostor?.close(resolve));
});

interface Embedded {
  port: number;
  output: () => string;
  exited: Promise<number | null>;
}

/** A child process that embeds the gateway, the variable in its environment from the start or set `after` startup. */
async function embed(issuer: string, routes: unknown[], when: 'before' | 'after'): Promise<Embedded> {
  const port = await findFreePort();
  const config = {
    server: { port, host: '127.0.0.1', publicUrl: `http://127.0.0.1:${port}` },
    oidc: { issuer, clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef' },
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `tlsenv${port}:` },
    routes,
  };
  const env = {
    ...process.env,
    EMBEDDED_CONFIG: JSON.stringify(config),
    ...(when === 'before' ? { NODE_TLS_REJECT_UNAUTHORIZED: '0' } : { EMBEDDED_SET_AFTER: 'NODE_TLS_REJECT_UNAUTHORIZED=0' }),
  };
  const child = spawn(process.execPath, [EMBEDDING_SCRIPT], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (c: Buffer) => (output += c.toString('utf8')));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { port, output: () => output, exited };
}

it('an embedded gateway with the variable set refuses to start, and asks an impostor provider nothing', async () => {
  const embedded = await embed(impostorUrl, [], 'before');
  expect(await withTimeout(embedded.exited, 20_000, 'the embedding process exits')).toBe(1);
  expect(embedded.output()).toMatch(/EMBEDDED FAILED NODE_TLS_REJECT_UNAUTHORIZED: 0 makes Node accept any certificate/);
  expect(asked).toEqual([]);
});

it('set only after startup, it still lets no WebSocket handshake reach an upstream whose certificate is not trusted', async () => {
  // Never reached: a route with auth none needs no provider.
  const embedded = await embed('http://127.0.0.1:9', [{ path: '/live', target: impostorUrl, auth: 'none', websocket: true }], 'after');
  await eventually('the embedding process ready', 20_000, () => embedded.output().includes('EMBEDDED READY'));
  const answer = await rawUpgrade(`http://127.0.0.1:${embedded.port}`, '/live/socket', { origin: `http://127.0.0.1:${embedded.port}` });
  expect(answer.status).toBe(502);
  expect(asked).toEqual([]);
});
