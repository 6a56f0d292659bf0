/**
 * `npm run bench:dpop`: what DPoP (RFC 9449) costs per proxied call.
 *
 * 1. Proof creation alone (src/crypto/dpop.ts: node:crypto, synchronous ES256), against the
 *    same proof made with jose's SignJWT (WebCrypto, asynchronous), and the key import that the
 *    per-token-set signer cache saves.
 * 2. The whole path: one in-process gateway (real Redis, the dev provider, an upstream that
 *    answers 200) with a Bearer route and a DPoP route on the same upstream and one signed-in
 *    session; keep-alive load at a fixed concurrency, alternating rounds, CPU time of this
 *    process per call (client included: the same on both routes, so the difference is the
 *    DPoP cost) and Redis commands per call (INFO commandstats).
 *
 *   --calls N        calls per round (default 4000)
 *   --rounds N       rounds per route (default 3)
 *   --connections C  concurrency (default 16)
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { importJWK, SignJWT } from 'jose';
import { Redis } from 'ioredis';
import { createProofSigner, generateDpopKey, publicJwk } from '../src/crypto/dpop.js';
import { createRuntime, parseConfig, startGateway } from '../src/index.js';
import { BrowserClient } from '../test/support/browser-client.js';
import { signIn } from '../test/support/drive-login.js';
import { gatewayClient, reserveServer } from '../test/support/gateway.js';
import { startTestProvider } from '../test/support/oidc-provider.js';
import { startRedisServer } from '../test/support/redis-server.js';

function arg(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  const value = at === -1 ? Number.NaN : Number(process.argv[at + 1]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

const CALLS = arg('calls', 4000);
const ROUNDS = arg('rounds', 3);
const CONNECTIONS = arg('connections', 16);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
const us = (value: number) => `${value.toFixed(1)} µs`;

async function microBenchmark(): Promise<Record<string, number>> {
  const key = generateDpopKey();
  const signer = createProofSigner(key);
  const input = { htm: 'GET', htu: 'https://api.example/orders/1', accessToken: 'x'.repeat(900), nonce: 'n'.repeat(22) };
  const n = 20_000;
  for (let i = 0; i < 2000; i++) signer.proof(input, 1);
  let t = performance.now();
  for (let i = 0; i < n; i++) signer.proof(input, 1);
  const nodeProof = ((performance.now() - t) * 1000) / n;

  t = performance.now();
  for (let i = 0; i < 2000; i++) createProofSigner(key);
  const keyImport = ((performance.now() - t) * 1000) / 2000;

  const joseKey = await importJWK({ ...key }, 'ES256');
  const jwk = publicJwk(key);
  const jose = () =>
    new SignJWT({ htm: input.htm, htu: input.htu, iat: 1, jti: 'j', ath: 'a', nonce: input.nonce })
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk })
      .sign(joseKey);
  for (let i = 0; i < 500; i++) await jose();
  t = performance.now();
  for (let i = 0; i < n / 4; i++) await jose();
  const joseProof = ((performance.now() - t) * 1000) / (n / 4);
  return { nodeProof, keyImport, joseProof };
}

async function load(agent: http.Agent, url: URL, headers: Record<string, string>, calls: number): Promise<void> {
  let next = 0;
  let failed = 0;
  const worker = async () => {
    while (next < calls) {
      next++;
      await new Promise<void>((resolve) => {
        const req = http.request(url, { agent, headers }, (res) => {
          if (res.statusCode !== 200) failed++;
          res.resume();
          res.on('end', resolve);
        });
        req.on('error', () => {
          failed++;
          resolve();
        });
        req.end();
      });
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  if (failed > 0) throw new Error(`${failed} calls to ${url.pathname} failed`);
}

async function commandCount(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  let total = 0;
  for (const m of info.matchAll(/cmdstat_(\w+):calls=(\d+)/g)) if (m[1] !== 'info') total += Number(m[2]);
  return total;
}

async function endToEnd(): Promise<Record<string, { cpuUs: number; wallUs: number; redisPerCall: number }>> {
  const redisServer = await startRedisServer();
  const upstream = http.createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' }).end('ok');
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const reserved = await reserveServer();
  reserved.server.close();
  const provider = await startTestProvider({ clients: [gatewayClient(reserved.url)], ttl: { AccessToken: 3600 } });
  const config = parseConfig(
    {
      server: { port: reserved.port, host: '127.0.0.1', publicUrl: reserved.url },
      oidc: { issuer: provider.issuer, clientId: 'bff-test', clientSecret: 'bff-test-secret-0123456789abcdef', scopes: ['openid', 'offline_access'] },
      session: { secrets: [randomBytes(32).toString('base64url')], encryptionKeys: [randomBytes(32).toString('base64')] },
      redis: { url: redisServer.url, keyPrefix: 'bench-dpop:' },
      routes: [
        { path: '/bearer', target: upstreamUrl, auth: 'user' },
        { path: '/dpop', target: upstreamUrl, auth: 'user', dpop: true },
      ],
      log: { level: 'warn' },
    },
    { env: {} },
  );
  const runtime = await createRuntime(config, { defaultMetrics: false });
  await runtime.provider.ready();
  const gateway = await startGateway(config, runtime);
  const client = new BrowserClient();
  await signIn(client, gateway.url);
  const cookie = Object.entries(client.cookies(gateway.url))
    .map(([k, v]) => `${k}=${v}`)
    .join('; ');
  const headers = { cookie, 'x-csrf': '1' };
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const stats = new Redis(redisServer.url);
  const results: Record<string, { cpu: number[]; wall: number[]; redis: number[] }> = { bearer: { cpu: [], wall: [], redis: [] }, dpop: { cpu: [], wall: [], redis: [] } };
  try {
    for (const route of ['bearer', 'dpop']) await load(agent, new URL(`${gateway.url}/${route}/warm`), headers, Math.min(CALLS, 1000));
    for (let round = 0; round < ROUNDS; round++) {
      for (const route of round % 2 ? ['dpop', 'bearer'] : ['bearer', 'dpop']) {
        const before = await commandCount(stats);
        const cpu = process.cpuUsage();
        const t = performance.now();
        await load(agent, new URL(`${gateway.url}/${route}/x`), headers, CALLS);
        const wall = performance.now() - t;
        const used = process.cpuUsage(cpu);
        const after = await commandCount(stats);
        const r = results[route] as { cpu: number[]; wall: number[]; redis: number[] };
        r.cpu.push((used.user + used.system) / CALLS);
        r.wall.push((wall * 1000) / CALLS);
        r.redis.push((after - before) / CALLS);
      }
    }
  } finally {
    agent.destroy();
    stats.disconnect();
    await gateway.shutdown();
    await provider.close();
    upstream.close();
    upstream.closeAllConnections();
    await redisServer.stop();
  }
  return Object.fromEntries(
    Object.entries(results).map(([route, r]) => [route, { cpuUs: median(r.cpu), wallUs: median(r.wall), redisPerCall: median(r.redis) }]),
  );
}

const micro = await microBenchmark();
console.log('DPoP proof creation (one ES256 signature, ~900-byte access token hashed for ath):');
console.log(`  node:crypto sync (src/crypto/dpop.ts)   ${us(micro.nodeProof ?? 0)} per proof`);
console.log(`  jose SignJWT (WebCrypto, async)         ${us(micro.joseProof ?? 0)} per proof`);
console.log(`  key import (saved by the signer cache)  ${us(micro.keyImport ?? 0)} per import`);
const e2e = await endToEnd();
console.log(`\nProxied calls, ${ROUNDS} alternating rounds of ${CALLS} calls at concurrency ${CONNECTIONS} (medians; CPU of client + gateway, one process):`);
for (const [route, r] of Object.entries(e2e)) {
  console.log(`  ${route.padEnd(7)} CPU ${us(r.cpuUs)} per call, wall ${us(r.wallUs)} per call, ${r.redisPerCall.toFixed(3)} Redis commands per call`);
}
const bearer = e2e.bearer as { cpuUs: number };
const dpop = e2e.dpop as { cpuUs: number };
console.log(`  DPoP adds ${us(dpop.cpuUs - bearer.cpuUs)} CPU per call (${((dpop.cpuUs / bearer.cpuUs - 1) * 100).toFixed(1)} %)`);
