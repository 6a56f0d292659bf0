/**
 * Account page ("Connected applications"): its own sign-in, the list of granted applications and
 * Revoke.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Grant } from 'oidc-provider';
import { authenticate, constantTimeEquals } from './accounts.js';
import type { Env } from './env.js';
import { splitScope } from './helpers.js';
import { escapeHtml, loginPage, messagePage, renderPage, scopeWords, sendPage, type RenderedPage } from './html.js';
import { accountCookie, appendSetCookie, parseCookies, readForm, redirect } from './http.js';
import { clientNameFor, demoHint } from './interactions.js';
import type { ConnectedApplication } from './types.js';

const ACCOUNT_COOKIE = 'devidp_account';
const CSRF_COOKIE = 'devidp_csrf';

async function currentAccount(env: Env, req: IncomingMessage, res: ServerResponse): Promise<string | undefined> {
  const own = env.accountSessions.get(parseCookies(req.headers.cookie).get(ACCOUNT_COOKIE) ?? '');
  if (own && own.expiresAt > Date.now()) return own.accountId;
  const session = await env.provider.Session.get(env.provider.createContext(req, res));
  return session.accountId && env.users.has(session.accountId) ? session.accountId : undefined;
}

/** Double-submit token: a Strict cookie that a cross-site form post cannot carry. */
function csrfToken(req: IncomingMessage, res: ServerResponse): string {
  const existing = parseCookies(req.headers.cookie).get(CSRF_COOKIE);
  if (existing && /^[A-Za-z0-9_-]{32,}$/.test(existing)) return existing;
  const token = randomBytes(24).toString('base64url');
  appendSetCookie(res, accountCookie(CSRF_COOKIE, token, 24 * 60 * 60));
  return token;
}

function csrfValid(req: IncomingMessage, form: URLSearchParams): boolean {
  const cookie = parseCookies(req.headers.cookie).get(CSRF_COOKIE);
  const field = form.get('csrf');
  return !!cookie && !!field && constantTimeEquals(cookie, field);
}

function csrfField(token: string): string {
  return `<input type="hidden" name="csrf" value="${escapeHtml(token)}">`;
}

export async function showAccount(env: Env, req: IncomingMessage, res: ServerResponse, revoked: string | null): Promise<void> {
  const token = csrfToken(req, res);
  const accountId = await currentAccount(env, req, res);
  if (!accountId) return sendPage(res, 200, accountLoginPage(env, token));
  const apps = await connectedApplications(env, accountId);
  sendPage(res, 200, accountPage(env, accountId, apps, token, revoked));
}

function accountLoginPage(env: Env, token: string, error?: string, login?: string): RenderedPage {
  const hint = demoHint(env);
  return loginPage('/account/login', {
    heading: 'Connected applications',
    subtitle: 'Sign in to see the applications you have given access to.',
    extraFields: csrfField(token),
    ...(error !== undefined ? { error } : {}),
    ...(login !== undefined ? { login } : {}),
    ...(hint !== undefined ? { hint } : {}),
  });
}

function accountPage(env: Env, accountId: string, apps: ConnectedApplication[], token: string, revoked: string | null): RenderedPage {
  const user = env.users.get(accountId);
  const notice = revoked ? `<p class="notice" role="status">Access for ${escapeHtml(revoked)} was revoked.</p>` : '';
  const rows = apps
    .map(
      (app) => `<tr><td><strong>${escapeHtml(app.clientName)}</strong><br><code>${escapeHtml(app.clientId)}</code></td>
<td><ul class="scopes">${app.scopes.map((s) => `<li>${escapeHtml(scopeWords(s, env.scopeWords))} <code>${escapeHtml(s)}</code></li>`).join('')}</ul></td>
<td><form method="post" action="/account/revoke">${csrfField(token)}<input type="hidden" name="client_id" value="${escapeHtml(app.clientId)}"><button type="submit">Revoke</button></form></td></tr>`,
    )
    .join('');
  const table = apps.length
    ? `<table><thead><tr><th>Application</th><th>Access</th><th></th></tr></thead><tbody>${rows}</tbody></table>`
    : '<p>No application has access to your account.</p>';
  return renderPage(
    'Connected applications',
    `<h1>Connected applications</h1><p>Signed in as <strong>${escapeHtml(user?.claims.name ?? accountId)}</strong> (<code>${escapeHtml(accountId)}</code>).</p>
${notice}${table}
<p class="hint">Revoking ends the application's access and every token it holds. Your password is not changed.</p>
<form method="post" action="/account/logout">${csrfField(token)}<button type="submit">Sign out of the provider</button></form>`,
  );
}

export async function accountLogin(env: Env, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const form = await readForm(req);
  if (!csrfValid(req, form)) return sendPage(res, 403, messagePage('Request refused', 'The form was not submitted from this page. Reload it and try again.'));
  const login = form.get('login') ?? '';
  const user = authenticate(env.users, login, form.get('password') ?? '');
  if (!user) return sendPage(res, 401, accountLoginPage(env, form.get('csrf') ?? '', 'Wrong username or password.', login));
  const now = Date.now();
  for (const [key, session] of [...env.accountSessions]) if (session.expiresAt <= now) env.accountSessions.delete(key);
  const id = randomBytes(24).toString('base64url');
  env.accountSessions.set(id, { accountId: user.id, expiresAt: Date.now() + env.ttl.Session * 1000 });
  appendSetCookie(res, accountCookie(ACCOUNT_COOKIE, id, env.ttl.Session));
  redirect(res, '/account');
}

export async function accountRevoke(env: Env, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const form = await readForm(req);
  if (!csrfValid(req, form)) return sendPage(res, 403, messagePage('Request refused', 'The form was not submitted from this page. Reload it and try again.'));
  const accountId = await currentAccount(env, req, res);
  const clientId = form.get('client_id');
  if (!accountId || !clientId) return redirect(res, '/account');
  await revokeGrantsFor(env, accountId, clientId);
  redirect(res, `/account?revoked=${encodeURIComponent(clientId)}`);
}

export async function accountLogout(env: Env, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const form = await readForm(req);
  if (!csrfValid(req, form)) return sendPage(res, 403, messagePage('Request refused', 'The form was not submitted from this page. Reload it and try again.'));
  env.accountSessions.delete(parseCookies(req.headers.cookie).get(ACCOUNT_COOKIE) ?? '');
  appendSetCookie(res, accountCookie(ACCOUNT_COOKIE, '', 0));
  // The provider's own end-session page asks for confirmation and ends its session.
  redirect(res, '/session/end');
}

async function grantsOf(env: Env, accountId: string): Promise<Grant[]> {
  const grants = await Promise.all(env.store.grantIdsFor(accountId).map((id) => env.provider.Grant.find(id)));
  return grants.filter((g): g is Grant => g !== undefined && g.accountId === accountId);
}

export async function connectedApplications(env: Env, accountId: string): Promise<ConnectedApplication[]> {
  const byClient = new Map<string, { scopes: Set<string>; resources: Set<string> }>();
  for (const grant of await grantsOf(env, accountId)) {
    if (!grant.clientId) continue;
    const entry = byClient.get(grant.clientId) ?? { scopes: new Set<string>(), resources: new Set<string>() };
    for (const s of splitScope(grant.getOIDCScope())) entry.scopes.add(s);
    for (const resource of Object.keys(grant.resources ?? {})) {
      entry.resources.add(resource);
      for (const s of splitScope(grant.getResourceScope(resource))) entry.scopes.add(s);
    }
    byClient.set(grant.clientId, entry);
  }
  const apps = await Promise.all(
    [...byClient].map(async ([clientId, e]) => ({
      clientId,
      clientName: await clientNameFor(env, clientId),
      scopes: [...e.scopes],
      resources: [...e.resources],
    })),
  );
  return apps.sort((a, b) => a.clientId.localeCompare(b.clientId));
}

export async function revokeGrantsFor(env: Env, accountId: string, clientId: string): Promise<number> {
  const grants = (await grantsOf(env, accountId)).filter((g) => g.clientId === clientId);
  for (const grant of grants) {
    if (grant.jti) env.store.destroyGrant(grant.jti);
  }
  env.log(`account revoke account=${accountId} client=${clientId} grants=${grants.length}`);
  return grants.length;
}
