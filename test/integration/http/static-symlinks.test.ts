/**
 * static: only files whose real path lies inside the root's real path are served (src/http/
 * static.ts): a symlink in the root, to a file or to a directory outside it, is answered as a
 * missing file is (404, or the SPA's index.html for a path without an extension), against the
 * real gateway, provider and Redis.
 *
 * Fails if, in src/http/static.ts, `if (file !== undefined && !(await within(file))) return next();`
 * is removed: the linked files outside the root are served.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BrowserClient } from '../../support/browser-client.js';
import { buildTestConfig, gatewayClient, reserveServer, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';

const SPA = '<!doctype html><title>the spa</title>';
const OUTSIDE = 'OUTSIDE-THE-STATIC-ROOT';

let provider: TestProvider;
let gateways: TestGateway[] = [];
let tmp: string;
let gw: TestGateway;
let linkedIndexGw: TestGateway;
/** A root that is a link to a release directory, re-pointed by a deploy while the gateway runs. */
let releaseGw: TestGateway;
let current: string;

async function gatewayOn(root: string): Promise<TestGateway> {
  const reserved = await reserveServer();
  const config = buildTestConfig({ issuer: provider.issuer, publicUrl: reserved.url });
  const started = await startTestGateway({ ...config, static: { root, spaFallback: true } }, reserved);
  gateways.push(started);
  return started;
}

beforeAll(async () => {
  tmp = mkdtempSync(path.join(tmpdir(), 'bff-static-'));
  const root = path.join(tmp, 'public');
  const outside = path.join(tmp, 'outside');
  mkdirSync(root);
  mkdirSync(outside);
  writeFileSync(path.join(outside, 'secret.txt'), OUTSIDE);
  writeFileSync(path.join(outside, 'index.html'), OUTSIDE);
  writeFileSync(path.join(root, 'index.html'), SPA);
  writeFileSync(path.join(root, 'app.js'), 'console.log("app")');
  symlinkSync(path.join(root, 'app.js'), path.join(root, 'alias.js'));
  symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'secret.txt'));
  symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'secret-page'));
  symlinkSync(outside, path.join(root, 'leak'), 'dir');
  // A root whose index.html is itself a link out: not even the SPA fallback serves it.
  const linkedRoot = path.join(tmp, 'linked-index');
  mkdirSync(linkedRoot);
  symlinkSync(path.join(outside, 'index.html'), path.join(linkedRoot, 'index.html'));

  // No sign-in here: the provider is only discovered.
  provider = await startTestProvider({ clients: [gatewayClient('http://127.0.0.1:1')] });
  for (const release of ['v1', 'v2']) {
    mkdirSync(path.join(tmp, release));
    writeFileSync(path.join(tmp, release, 'index.html'), `<title>${release}</title>`);
    writeFileSync(path.join(tmp, release, 'app.js'), `"${release}"`);
  }
  current = path.join(tmp, 'current');
  symlinkSync(path.join(tmp, 'v1'), current, 'dir');

  gw = await gatewayOn(root);
  linkedIndexGw = await gatewayOn(linkedRoot);
  releaseGw = await gatewayOn(current);
});

afterAll(async () => {
  for (const g of gateways) await g.close();
  gateways = [];
  await provider?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

async function get(base: string, p: string, accept = '*/*') {
  const res = await new BrowserClient().get(`${base}${p}`, { headers: { accept } });
  return { status: res.status, body: res.text };
}

describe('static files and symlinks', () => {
  it('serves files in the root, and links that stay inside it', async () => {
    expect(await get(gw.url, '/app.js')).toEqual({ status: 200, body: 'console.log("app")' });
    expect(await get(gw.url, '/alias.js')).toEqual({ status: 200, body: 'console.log("app")' });
  });

  it('answers a file linked from outside the root, or reached through a linked directory, as a missing file', async () => {
    const missing = await get(gw.url, '/missing.txt');
    expect(missing.status).toBe(404);
    for (const p of ['/secret.txt', '/leak/secret.txt', '/leak/index.html']) {
      const res = await get(gw.url, p);
      expect(res).toEqual(missing);
    }
  });

  it('gives the SPA page, as for a missing path, where a link out has no extension or is a directory', async () => {
    const html = 'text/html';
    expect(await get(gw.url, '/no-such-page', html)).toEqual({ status: 200, body: SPA });
    for (const p of ['/secret-page', '/leak/', '/leak']) {
      const res = await get(gw.url, p, html);
      expect(res).toEqual({ status: 200, body: SPA });
    }
  });

  it('does not serve an index.html that links out of the root, even as the SPA fallback', async () => {
    for (const p of ['/', '/index.html', '/some/page']) {
      const res = await get(linkedIndexGw.url, p, 'text/html');
      expect(res.status).toBe(404);
      expect(res.body).not.toContain(OUTSIDE);
    }
  });

  // Fails if, in static.ts insideRoot, the root is resolved once and never again
  // (`realRoot = await realpath(root)...` → `realRoot ??= await realpath(root)...`): every file
  // of the new release lies outside the old one's real path, and the site answered 404.
  it('follows a root that is itself a link when a deploy re-points it', async () => {
    expect(await get(releaseGw.url, '/app.js')).toEqual({ status: 200, body: '"v1"' });
    // The deploy's atomic swap: a new link renamed over the old one.
    symlinkSync(path.join(tmp, 'v2'), `${current}.next`, 'dir');
    renameSync(`${current}.next`, current);
    expect(await get(releaseGw.url, '/app.js')).toEqual({ status: 200, body: '"v2"' });
    expect(await get(releaseGw.url, '/', 'text/html')).toEqual({ status: 200, body: '<title>v2</title>' });
    expect(await get(releaseGw.url, '/client/route', 'text/html')).toEqual({ status: 200, body: '<title>v2</title>' });
  });
});
