/**
 * A WebSocket route to an https upstream checks its certificate whatever the environment says,
 * as every other proxied call does (httpxy sets rejectUnauthorized itself). With
 * NODE_TLS_REJECT_UNAUTHORIZED=0 in the process's environment, plain calls to an impostor were
 * refused while the WebSocket handshake, a user's Bearer token with it, went through (found by
 * the TLS red team). The CLI now refuses to start with that variable (config/cli-check.test.ts);
 * a process that embeds the gateway (src/index.ts) with a config read from its own map still
 * may have it, hence this second line. The variable is seen only by a real process (Jest's
 * process.env is a copy): the gateway runs in a child that embeds it.
 *
 * Mutation that fails this file (by hand, once): src/proxy/websocket-tunnel.ts without its
 * `rejectUnauthorized: true`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { ensureBuilt } from '../../support/cli-process.js';
import { randomKey, randomSecret } from '../../support/config.js';
import { listenOnLoopback } from '../../support/listen.js';
import { rawUpgrade } from '../../support/raw-http.js';
import { findFreePort, redisUrlForTests } from '../../support/redis-server.js';
import { makeSelfSignedCertificate } from '../../support/tls-cert.js';
import { eventually } from '../../support/wait.js';

let tmp: string;
let impostor: https.Server;
const upgrades: IncomingHttpHeaders[] = [];
let child: ChildProcess | undefined;
let output = '';
let port: number;

beforeAll(async () => {
  ensureBuilt();
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-wss-tls-'));
  // A certificate nobody trusts: it signs itself, and no test passes it to Node.
  impostor = https.createServer(makeSelfSignedCertificate());
  impostor.on('upgrade', (req, socket) => {
    upgrades.push(req.headers);
    socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
  });
  const impostorPort = await listenOnLoopback(impostor);
  port = await findFreePort();
  const config = {
    server: { port, host: '127.0.0.1', publicUrl: `http://127.0.0.1:${port}` },
    // Never reached: a route with auth none needs no provider.
    oidc: { issuer: 'http://127.0.0.1:9', clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef' },
    session: { secrets: [randomSecret()], encryptionKeys: [randomKey()] },
    redis: { url: redisUrlForTests(), keyPrefix: `wsstls${port}:` },
    routes: [{ path: '/live', target: `https://127.0.0.1:${impostorPort}`, auth: 'none', websocket: true }],
  };
  const script = path.join(tmp, 'embed.mjs');
  writeFileSync(
    script,
    `import { createRuntime, parseConfig, startGateway } from ${JSON.stringify(path.resolve('dist/index.js'))};\n` +
      `const config = parseConfig(JSON.parse(process.env.EMBEDDED_CONFIG), { env: {} });\n` +
      `await startGateway(config, await createRuntime(config, { defaultMetrics: false }));\n` +
      `console.log('EMBEDDED READY');\n`,
  );
  child = spawn(process.execPath, [script], { env: { ...process.env, NODE_TLS_REJECT_UNAUTHORIZED: '0', EMBEDDED_CONFIG: JSON.stringify(config) }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (c: Buffer) => (output += c.toString('utf8')));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString('utf8')));
  await eventually('the embedding process ready', 20_000, () => output.includes('EMBEDDED READY'));
}, 60_000);

afterAll(async () => {
  child?.kill('SIGKILL');
  impostor?.closeAllConnections();
  await new Promise((resolve) => impostor?.close(resolve));
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

it('refuses an upstream whose certificate is not trusted under NODE_TLS_REJECT_UNAUTHORIZED=0: nothing reaches it', async () => {
  const answer = await rawUpgrade(`http://127.0.0.1:${port}`, '/live/socket', { origin: `http://127.0.0.1:${port}` });
  expect(answer.status).toBe(502);
  expect(upgrades).toEqual([]);
});
