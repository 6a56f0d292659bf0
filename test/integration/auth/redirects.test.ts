/**
 * Redirects back into the app stay on publicUrl's origin (SPEC §3, RFC 9700 §4.11.1), and the
 * gateway's own path space never falls through to the SPA: against the real gateway, provider
 * and Redis, with the SPA served by the gateway (spaFallback on).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { expectErrorBody } from '../../support/assertions.js';

let provider: TestProvider;
let gw: TestGateway;
let spaRoot: string;

beforeAll(async () => {
  spaRoot = mkdtempSync(path.join(tmpdir(), 'bff-spa-'));
  writeFileSync(path.join(spaRoot, 'index.html'), '<!doctype html><title>the spa</title>');
  const reserved = await reserveServer();
  provider = await startTestProvider({ clients: [gatewayClient(reserved.url)] });
  const config = buildTestConfig({ issuer: provider.issuer, publicUrl: reserved.url });
  gw = await startTestGateway({ ...config, static: { root: spaRoot, spaFallback: true } }, reserved);
});

afterAll(async () => {
  await gw?.close();
  await provider?.close();
  rmSync(spaRoot, { recursive: true, force: true });
});

const asJson = { headers: { accept: 'application/json' } };

describe('returnTo, judged on its normalised form', () => {
  it.each(['/.//evil.example/phish', '/%2e%2e//evil.example/phish', '/%2f%2fevil.example/phish', '/%09/evil.example/phish', '/./\\evil.example'])(
    'refuses %s with 400 invalid_return_to, before any transaction exists',
    async (returnTo) => {
      const before = await gw.runtime.transactions.active();
      const res = await new BrowserClient().get(`${gw.url}/auth/login?returnTo=${encodeURIComponent(returnTo)}`, asJson);
      expectErrorBody(res, 'invalid_return_to', 400);
      expect(res.headers.get('location')).toBeNull();
      expect(await gw.runtime.transactions.active()).toBe(before);
    },
  );
});

describe('every redirect back into the app is absolute, on publicUrl', () => {
  it('after a declined consent (provider error)', async () => {
    const client = new BrowserClient();
    const { hops } = await signIn(client, gw.url, { consent: 'deny', returnTo: '/start/here?tab=2' });
    const callback = hops.find((h) => h.url.startsWith(`${gw.url}/auth/callback`));
    expect(callback?.status).toBe(302);
    expect(callback?.location).toBe(`${gw.url}/start/here?tab=2&error=access_denied`);
    expect(new URL(callback?.location as string).origin).toBe(gw.config.derived.publicOrigin);
  });

  it('after a successful sign-in', async () => {
    const { hops } = await signIn(new BrowserClient(), gw.url, { returnTo: '/orders#latest' });
    const callback = hops.find((h) => h.url.startsWith(`${gw.url}/auth/callback`));
    expect(callback?.location).toBe(`${gw.url}/orders#latest`);
  });
});

describe('the gateway path space', () => {
  it.each(['/auth/nope', '/auth/login/extra', '/auth', '/auth/'])('answers GET %s with a 404 JSON error, never the SPA page', async (p) => {
    const res = await new BrowserClient().get(`${gw.url}${p}`, { headers: { accept: 'text/html,application/xhtml+xml' } });
    expectErrorBody(res, 'not_found', 404);
    expect(res.text).not.toContain('the spa');
  });

  it('still serves the SPA for its own routes', async () => {
    const res = await new BrowserClient().get(`${gw.url}/orders/42`, { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    expect(res.text).toContain('the spa');
  });
});
