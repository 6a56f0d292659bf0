/**
 * oidc-provider v9 silently drops offline_access from an authorization request that does not
 * carry prompt=consent. Standard clients (the gateway included) do not send it, so the first
 * time a client asks for offline access the dev provider turns the request into a consent
 * request; once the grant holds offline_access, issueRefreshToken looks at the grant instead
 * (configuration.ts), and no consent is asked again.
 *
 * Two ways in: the browser's `GET /auth?…` (its query is rewritten before the provider reads
 * it), and a pushed request (RFC 9126) whose `GET /auth?client_id&request_uri` carries nothing
 * to rewrite. A push has no browser session to ask about, so the stored request is amended in
 * two steps: after the push (offline_access put back, prompt=consent added, the client's own
 * prompt kept in a private claim), and when the browser arrives with the request_uri (the
 * addition undone when this browser's grant already holds offline_access).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { UnsecuredJWT } from 'jose';
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { Env } from './env.js';
import { grantHasOfflineAccess, splitScope } from './helpers.js';

// oidc-provider's default routes; the handler serves the provider at the root of its origin.
export const AUTHORIZATION_PATH = '/auth';
export const PAR_PATH = '/request';
const PUSHED_REQUEST_URN = 'urn:ietf:params:oauth:request_uri:';
/** The client's own prompt (maybe empty) in a pushed request whose consent the dev provider added. */
const ADDED_CONSENT = 'urn:bff:dev:consent-added-over';

type RequestCtx = { querystring: string; req: IncomingMessage; res: ServerResponse };
/** The stored push (oidc-provider's PushedAuthorizationRequest model): what is read and written here. */
interface StoredPush {
  request: string;
  exp?: number;
  save(ttlSeconds: number): Promise<unknown>;
}

/** The browser's GET /auth: a plain request is rewritten, a pushed one amended back (see above). */
export async function askConsentForOfflineAccess(env: Env, ctx: RequestCtx): Promise<void> {
  const query = new URLSearchParams(ctx.querystring);
  const clientId = query.get('client_id');
  if (!clientId) return;
  const requestUri = query.get('request_uri');
  if (requestUri !== null) return undoAddedConsent(env, ctx, clientId, requestUri);
  const prompts = splitScope(query.get('prompt'));
  if (!splitScope(query.get('scope')).includes('offline_access')) return;
  if (prompts.includes('none') || prompts.includes('consent') || query.has('request')) return;
  const client = await env.provider.Client.find(clientId);
  if (!client?.grantTypeAllowed('refresh_token')) return;
  if (await offlineAccessAlreadyGranted(env, ctx, clientId)) return;
  query.set('prompt', [...prompts, 'consent'].join(' '));
  ctx.querystring = query.toString();
}

/**
 * After a successful push (201): when the pushed form asked for offline_access without
 * prompt=consent (none, consent or a signed request object are left alone), the stored request
 * gets offline_access back and prompt=consent.
 */
export async function addConsentToPush(ctx: KoaContextWithOIDC): Promise<void> {
  if (ctx.status !== 201) return;
  const body = ctx.oidc.body as Record<string, unknown> | undefined;
  const push = ctx.oidc.entities.PushedAuthorizationRequest as StoredPush | undefined;
  const client = ctx.oidc.client;
  if (!body || !push || !client || body.request !== undefined) return;
  if (typeof body.scope !== 'string' || !splitScope(body.scope).includes('offline_access')) return;
  if (!client.grantTypeAllowed('refresh_token')) return;
  await rewrite(push, (payload) => {
    // The prompt as stored, not as posted: oidc-provider stores `max_age=0` as `prompt=login`,
    // and reading the form's (absent) prompt lost it: a pushed max_age=0 signed in silently.
    const ownPrompt = typeof payload.prompt === 'string' ? payload.prompt : '';
    const prompts = splitScope(ownPrompt);
    if (prompts.includes('none') || prompts.includes('consent')) return false;
    payload.scope = [...new Set([...splitScope(typeof payload.scope === 'string' ? payload.scope : ''), 'offline_access'])].join(' ');
    payload.prompt = [...prompts, 'consent'].join(' ');
    payload[ADDED_CONSENT] = ownPrompt;
    return true;
  });
}

async function undoAddedConsent(env: Env, ctx: RequestCtx, clientId: string, requestUri: string): Promise<void> {
  if (!requestUri.startsWith(PUSHED_REQUEST_URN)) return;
  const push = (await env.provider.PushedAuthorizationRequest.find(requestUri.slice(PUSHED_REQUEST_URN.length))) as StoredPush | undefined;
  if (!push || typeof push.request !== 'string') return;
  const payload = decodeUnsecured(push.request);
  if (typeof payload?.[ADDED_CONSENT] !== 'string') return;
  if (!(await offlineAccessAlreadyGranted(env, ctx, clientId))) return;
  const ownPrompt = payload[ADDED_CONSENT];
  await rewrite(push, (p) => {
    if (ownPrompt) p.prompt = ownPrompt;
    else delete p.prompt;
    delete p[ADDED_CONSENT];
    return true;
  });
}

/** Plain pushes are stored as unsecured JWTs (alg none) of their parameters; others are left alone. */
function decodeUnsecured(request: string): Record<string, unknown> | undefined {
  try {
    return UnsecuredJWT.decode(request).payload as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/** `change` answers whether it changed the payload (nothing is saved when it did not). */
async function rewrite(push: StoredPush, change: (payload: Record<string, unknown>) => boolean): Promise<void> {
  const payload = decodeUnsecured(push.request);
  if (!payload || !change(payload)) return;
  push.request = new UnsecuredJWT(payload).encode();
  // The push keeps its own expiry (at most 60 s in oidc-provider).
  const ttl = (push.exp ?? 0) - Math.floor(Date.now() / 1000);
  await push.save(Math.max(ttl, 1));
}

async function offlineAccessAlreadyGranted(env: Env, ctx: { req: IncomingMessage; res: ServerResponse }, clientId: string): Promise<boolean> {
  const { provider } = env;
  const session = await provider.Session.get(provider.createContext(ctx.req, ctx.res));
  const grantId = session.accountId ? session.grantIdFor(clientId) : undefined;
  return grantId ? grantHasOfflineAccess(await provider.Grant.find(grantId)) : false;
}
