/**
 * Routing: the custom pages (interactions, account, home) first, everything else to oidc-provider.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { accountLogin, accountLogout, accountRevoke, showAccount } from './account.js';
import type { Env } from './env.js';
import { errorMessage } from './helpers.js';
import { escapeHtml, messagePage, renderPage, sendPage, type RenderedPage } from './html.js';
import { FormError } from './http.js';
import { abortInteraction, showInteraction, submitConsent, submitLogin, submitOtp } from './interactions.js';
import type { DevIdp } from './types.js';

const INTERACTION_ROUTE = /^\/interaction\/([A-Za-z0-9_-]+)(?:\/(login|otp|confirm|abort))?$/;

export async function route(env: Env, req: IncomingMessage, res: ServerResponse, providerCallback: DevIdp['handler']): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://dev-idp.invalid');
  const { pathname } = url;
  const method = req.method ?? 'GET';
  const interaction = INTERACTION_ROUTE.exec(pathname);
  if (interaction) return interactionRoute(env, req, res, method, interaction[1] ?? '', interaction[2]);
  if (pathname === '/account' && method === 'GET') return showAccount(env, req, res, url.searchParams.get('revoked'));
  if (pathname === '/account/login' && method === 'POST') return accountLogin(env, req, res);
  if (pathname === '/account/revoke' && method === 'POST') return accountRevoke(env, req, res);
  if (pathname === '/account/logout' && method === 'POST') return accountLogout(env, req, res);
  if (pathname === '/' && method === 'GET') return sendPage(res, 200, homePage(env));
  providerCallback(req, res);
}

async function interactionRoute(env: Env, req: IncomingMessage, res: ServerResponse, method: string, uid: string, action: string | undefined): Promise<void> {
  if (action === undefined && method === 'GET') return showInteraction(env, req, res, uid);
  if (action !== undefined && method === 'POST') {
    if (action === 'login') return submitLogin(env, req, res, uid);
    if (action === 'otp') return submitOtp(env, req, res, uid);
    if (action === 'confirm') return submitConsent(env, req, res, uid);
    return abortInteraction(env, req, res, uid);
  }
  sendPage(res, 405, messagePage('Method not allowed', 'This page does not accept that request.'));
}

export function failRequest(env: Env, res: ServerResponse, err: unknown): void {
  if (err instanceof FormError) {
    if (!res.headersSent) sendPage(res, err.status, messagePage('Bad request', err.message));
    return;
  }
  env.log(`page error ${errorMessage(err)}`);
  if (!res.headersSent) sendPage(res, 500, messagePage('Something went wrong', 'The development provider failed to handle this request.'));
  else res.destroy();
}

function homePage(env: Env): RenderedPage {
  return renderPage(
    'Development OpenID provider',
    `<h1>Development OpenID provider</h1><p>Issuer: <code>${escapeHtml(env.options.issuer)}</code></p>
<ul><li><a href="/account">Connected applications</a></li><li><a href="/.well-known/openid-configuration">Discovery document</a></li></ul>`,
  );
}
