/**
 * A provider whose certificate the gateway does not trust is refused, and the log says why (found
 * by the TLS red team: fetch's failure is a TypeError whose cause holds the reason, and every
 * discovery, refresh and revocation failure read `TypeError`, a bad certificate and a refused
 * connection alike; and the `*.code` redaction hid every error code in `err`).
 *
 * Mutation that fails this file (by hand, once): src/oidc/errors.ts describeProviderError with
 * `err.name` in place of `withCauseCode(err)`. The log's error codes: unit/observability/logger.test.ts.
 */
import https from 'node:https';
import { buildTestConfig, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { listenOnLoopback } from '../../support/listen.js';
import { makeSelfSignedCertificate } from '../../support/tls-cert.js';
import { eventually } from '../../support/wait.js';

let provider: https.Server;
const asked: string[] = [];
let gateway: TestGateway;

beforeAll(async () => {
  // Signs itself, and no test passes it to Node: not trusted.
  provider = https.createServer(makeSelfSignedCertificate(), (req, res) => {
    asked.push(req.url ?? '');
    res.writeHead(404).end();
  });
  const port = await listenOnLoopback(provider);
  const reserved = await reserveServer();
  gateway = await startTestGateway(buildTestConfig({ issuer: `https://localhost:${port}`, publicUrl: reserved.url, logLevel: 'info' }), reserved, { waitForProvider: false });
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  provider?.closeAllConnections();
  await new Promise((resolve) => provider?.close(resolve));
});

type Line = { event?: string; reason?: string };

it('refuses discovery from a provider with an untrusted certificate, and names the reason in discovery_failed', async () => {
  const failed = () => gateway.logs.map((l) => JSON.parse(l) as Line).filter((l) => l.event === 'discovery_failed');
  await eventually('a discovery failure logged', 10_000, () => failed().length > 0);
  expect(failed()[0]?.reason).toMatch(/^\w+Error: DEPTH_ZERO_SELF_SIGNED_CERT$/);
  expect(asked).toEqual([]);
  const login = await fetch(`${gateway.url}/auth/login`, { redirect: 'manual', signal: AbortSignal.timeout(10_000) });
  expect(login.status).toBe(503);
});
