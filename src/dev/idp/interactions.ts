/**
 * Interaction pages (login, consent) and their form posts: sign in, approve, deny.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Interaction } from 'oidc-provider';
import { authenticate } from './accounts.js';
import type { Env } from './env.js';
import { splitScope, stringArray, stringArrayRecord } from './helpers.js';
import { consentPage, escapeHtml, loginPage, messagePage, scopeWords, sendPage } from './html.js';
import { readForm } from './http.js';
import { ACR, startSecondFactor, submitSecondFactor, wantsSecondFactor } from './second-factor.js';

/**
 * The interaction cookie (scoped to /interaction/<uid>) must name the same interaction as the
 * URL: that binds every form post to the browser that started the sign-in.
 */
async function loadInteraction(env: Env, req: IncomingMessage, res: ServerResponse, uid: string): Promise<Interaction | undefined> {
  const details = await env.provider.interactionDetails(req, res).catch(() => undefined);
  if (!details || details.uid !== uid) {
    sendPage(res, 400, messagePage('Sign-in expired', 'This sign-in page has expired or belongs to another browser. Go back to the application and sign in again.'));
    return undefined;
  }
  return details;
}

export async function clientNameFor(env: Env, clientId: unknown): Promise<string> {
  if (typeof clientId !== 'string') return 'An application';
  const client = await env.provider.Client.find(clientId);
  return client?.clientName ?? clientId;
}

export function demoHint(env: Env): string | undefined {
  if (env.options.users) return undefined;
  return 'Demo accounts: alice / alice-password, bob / bob-password.';
}

async function renderLogin(env: Env, res: ServerResponse, details: Interaction, status: number, error?: string, login?: string): Promise<void> {
  const base = `/interaction/${encodeURIComponent(details.uid)}`;
  const clientName = await clientNameFor(env, details.params.client_id);
  const hint = demoHint(env);
  sendPage(
    res,
    status,
    loginPage(`${base}/login`, {
      heading: 'Sign in',
      subtitle: `to continue to <strong>${escapeHtml(clientName)}</strong>`,
      cancelAction: `${base}/abort`,
      ...(error !== undefined ? { error } : {}),
      ...(login !== undefined ? { login } : {}),
      ...(hint !== undefined ? { hint } : {}),
    }),
  );
}

async function renderConsent(env: Env, res: ServerResponse, details: Interaction): Promise<void> {
  const clientName = await clientNameFor(env, details.params.client_id);
  const accountId = details.session?.accountId ?? '';
  const userName = env.users.get(accountId)?.claims.name ?? accountId;
  const items = splitScope(details.params.scope).map((scope) => ({ scope, words: scopeWords(scope, env.scopeWords) }));
  const resources = Object.keys(stringArrayRecord(details.prompt.details.missingResourceScopes));
  sendPage(res, 200, consentPage(details.uid, clientName, userName, items, resources));
}

export async function showInteraction(env: Env, req: IncomingMessage, res: ServerResponse, uid: string): Promise<void> {
  const details = await loadInteraction(env, req, res, uid);
  if (!details) return;
  if (details.prompt.name === 'login') return renderLogin(env, res, details, 200);
  if (details.prompt.name === 'consent') return renderConsent(env, res, details);
  sendPage(res, 501, messagePage('Not supported', `The development provider cannot handle the "${details.prompt.name}" step.`));
}

export async function submitLogin(env: Env, req: IncomingMessage, res: ServerResponse, uid: string): Promise<void> {
  const form = await readForm(req);
  const details = await loadInteraction(env, req, res, uid);
  if (!details) return;
  if (details.prompt.name !== 'login') return showInteraction(env, req, res, uid);
  const login = form.get('login') ?? '';
  const user = authenticate(env.users, login, form.get('password') ?? '');
  if (!user) return renderLogin(env, res, details, 401, 'Wrong username or password.', login);
  if (wantsSecondFactor(details)) return startSecondFactor(env, res, details.uid, user.id);
  env.log(`login account=${user.id}`);
  await env.provider.interactionFinished(req, res, { login: { accountId: user.id, acr: ACR.password, amr: ['pwd'] } }, { mergeWithLastSubmission: false });
}

/** The one-time code of a step-up sign-in (second-factor.ts); expired or used up: the login page again. */
export async function submitOtp(env: Env, req: IncomingMessage, res: ServerResponse, uid: string): Promise<void> {
  const details = await loadInteraction(env, req, res, uid);
  if (!details) return;
  if (details.prompt.name !== 'login') return showInteraction(env, req, res, uid);
  if (!(await submitSecondFactor(env, req, res, details))) {
    return renderLogin(env, res, details, 401, 'The one-time code expired or was wrong too often; sign in again.');
  }
}

export async function submitConsent(env: Env, req: IncomingMessage, res: ServerResponse, uid: string): Promise<void> {
  await readForm(req);
  const details = await loadInteraction(env, req, res, uid);
  if (!details) return;
  if (details.prompt.name !== 'consent' || !details.session) return showInteraction(env, req, res, uid);
  const grantId = await saveConsent(env, details, details.session.accountId);
  env.log(`consent account=${details.session.accountId} client=${String(details.params.client_id)}`);
  await env.provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

async function saveConsent(env: Env, details: Interaction, accountId: string): Promise<string> {
  const { provider } = env;
  const existing = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
  const grant = existing ?? new provider.Grant({ accountId, clientId: String(details.params.client_id) });
  const missing = details.prompt.details;
  const declined = new Set(env.options.declinedScopes);
  const [oidcScope, oidcDeclined] = partition(stringArray(missing.missingOIDCScope), declined);
  if (oidcScope.length) grant.addOIDCScope(oidcScope.join(' '));
  if (oidcDeclined.length) grant.rejectOIDCScope(oidcDeclined.join(' '));
  const claims = stringArray(missing.missingOIDCClaims);
  if (claims.length) grant.addOIDCClaims(claims);
  for (const [indicator, requested] of Object.entries(stringArrayRecord(missing.missingResourceScopes))) {
    const [scopes, rejected] = partition(requested, declined);
    if (scopes.length) grant.addResourceScope(indicator, scopes.join(' '));
    if (rejected.length) grant.rejectResourceScope(indicator, rejected.join(' '));
  }
  return grant.save();
}

/** [kept, declined] */
function partition(scopes: string[], declined: ReadonlySet<string>): [string[], string[]] {
  return [scopes.filter((s) => !declined.has(s)), scopes.filter((s) => declined.has(s))];
}

export async function abortInteraction(env: Env, req: IncomingMessage, res: ServerResponse, uid: string): Promise<void> {
  await readForm(req);
  const details = await loadInteraction(env, req, res, uid);
  if (!details) return;
  env.log(`consent denied client=${String(details.params.client_id)}`);
  await env.provider.interactionFinished(
    req,
    res,
    { error: 'access_denied', error_description: 'The user declined to grant access.' },
    { mergeWithLastSubmission: false },
  );
}
