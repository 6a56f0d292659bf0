// What tracing costs a proxied call (issue 17: "zero cost when off, measure it").
//
//   node bench/tracing-cost.mjs <dist dir> <calls> <off|on>
//
// One process: a redis-server child, an upstream, (on) a collector that accepts and discards,
// and the gateway built from <dist dir> as main.ts builds it (createRuntime + createApp), with
// one `auth: none` route. 300 warm-up calls, then <calls> sequential keep-alive calls, timed.
// Run it under `valgrind --tool=callgrind` with <calls> = 0 and = N: the difference in
// instructions divided by N is the per-call cost, independent of the machine's load (this
// machine has no hardware counters for perf). Compare main's dist/ with this branch's.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [distDir, callsArg, mode] = process.argv.slice(2);
const calls = Number(callsArg);
const dist = (f) => pathToFileURL(path.resolve(distDir, f)).href;
const { parseConfig } = await import(dist('config/load.js'));
const { createRuntime } = await import(dist('runtime.js'));
const { createApp } = await import(dist('app.js'));

const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
const listen = (server) => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));

const redisPort = await freePort();
const redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
// However this process ends (a config error, a failed call), the child goes with it.
process.once('exit', () => redis.kill('SIGTERM'));
for (let i = 0; i < 100; i++) {
  const up = await new Promise((resolve) => net.connect(redisPort, '127.0.0.1').once('connect', function () { this.destroy(); resolve(true); }).once('error', () => resolve(false)));
  if (up) break;
  await new Promise((r) => setTimeout(r, 50));
}

const body = JSON.stringify({ ok: true });
const upstream = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }).end(body));
const upstreamPort = await listen(upstream);
const collector = http.createServer((req, res) => req.resume().once('end', () => res.writeHead(200).end('{}')));
const collectorPort = await listen(collector);

const gatewayServer = http.createServer();
const gatewayPort = await listen(gatewayServer);
const config = parseConfig(
  {
    server: { port: 0, host: '127.0.0.1', publicUrl: `http://127.0.0.1:${gatewayPort}` },
    oidc: { issuer: 'http://127.0.0.1:9', clientId: 'bench', clientSecret: randomBytes(24).toString('base64url') },
    session: { secrets: [randomBytes(32).toString('base64url')], encryptionKeys: [randomBytes(32).toString('base64')] },
    redis: { url: `redis://127.0.0.1:${redisPort}`, keyPrefix: 'bench:' },
    routes: [{ path: '/open', target: `http://127.0.0.1:${upstreamPort}`, auth: 'none' }],
    log: { level: 'fatal' },
    ...(mode === 'on' ? { observability: { tracing: { endpoint: `http://127.0.0.1:${collectorPort}/v1/traces` } } } : {}),
  },
  { env: {} },
);
const runtime = await createRuntime(config, { defaultMetrics: false, discoveryRetry: { initialMs: 600_000, maxMs: 600_000 } });
const app = createApp(runtime);
gatewayServer.on('request', app);

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const call = () =>
  new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port: gatewayPort, path: '/open/echo', agent, headers: { 'x-csrf': '1' } }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
        res.resume().once('end', resolve);
      })
      .once('error', reject);
  });

for (let i = 0; i < 300; i++) await call();
const started = performance.now();
for (let i = 0; i < calls; i++) await call();
const elapsed = performance.now() - started;
if (calls > 0) process.stdout.write(`${mode} ${distDir}: ${calls} calls, ${((elapsed * 1000) / calls).toFixed(1)} µs per call\n`);

agent.destroy();
gatewayServer.closeAllConnections();
await new Promise((r) => gatewayServer.close(r));
await runtime.close();
upstream.close();
collector.close();
redis.kill('SIGTERM');
