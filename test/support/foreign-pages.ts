/**
 * Pages of another origin for the browser tests: an HTTP server whose pages a test writes, on
 * 127.0.0.1:Q. Visited as http://localhost:Q it is CROSS-SITE to the gateway
 * (http://127.0.0.1:P); visited as http://127.0.0.1:Q it is SAME-SITE but cross-origin (ports do
 * not make a site: the model of a sibling subdomain, or of another app on the host). Also: a
 * signed-in user's cookie put into a Chromium context, and a fetch made from within a page.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { BrowserClient } from './browser-client.js';
import { WAIT_MS } from './chromium.js';
import { signIn } from './drive-login.js';
import type { Stack } from './stack.js';
import { withTimeout } from './wait.js';

export interface ForeignPages {
  server: Server;
  port: number;
  crossSite: string;
  sameSite: string;
  pages: Map<string, string>;
  hits: string[];
  close(): Promise<void>;
}

export async function startForeignPages(): Promise<ForeignPages> {
  const pages = new Map<string, string>();
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(req.url ?? '');
    const body = pages.get((req.url ?? '/').split('?')[0] as string);
    if (body === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('no page');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    crossSite: `http://localhost:${port}`,
    sameSite: `http://127.0.0.1:${port}`,
    pages,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A session cookie value of `user`'s, signed in outside the browser. */
export async function sessionOf(stack: Stack, user = 'alice'): Promise<string> {
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url, { user });
  return client.cookies(stack.gateway.url)[stack.gateway.config.derived.sessionCookieName] as string;
}

/**
 * A fresh context holding `cookie` as the gateway's session cookie (as the gateway sets it).
 * `bypassCSP`: a page may fetch what the gateway's CSP would upgrade to https (tests over http).
 */
export async function contextWith(browser: Browser, stack: Stack, cookie: string, options: { bypassCSP?: boolean } = {}): Promise<BrowserContext> {
  const context = await withTimeout(browser.newContext(options.bypassCSP ? { bypassCSP: true } : {}), WAIT_MS, 'a new context');
  context.setDefaultTimeout(WAIT_MS);
  context.setDefaultNavigationTimeout(WAIT_MS);
  const host = new URL(stack.gateway.url).hostname;
  const name = stack.gateway.config.derived.sessionCookieName;
  await context.addCookies([{ name, value: cookie, domain: host, path: '/', httpOnly: true, sameSite: stack.gateway.config.session.sameSite === 'lax' ? 'Lax' : 'Strict' }]);
  return context;
}

/** A fetch from within `page` (its origin), answered status and body. */
export function pageFetch(page: Page, url: string, init: Record<string, unknown> = {}): Promise<{ status: number; body: string }> {
  return withTimeout(
    page.evaluate(
      async ([u, i]) => {
        const r = await fetch(u as string, i as RequestInit);
        return { status: r.status, body: await r.text() };
      },
      [url, init] as const,
    ),
    WAIT_MS,
    `fetch ${url} in the page`,
  );
}
