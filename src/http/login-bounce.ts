/**
 * One same-origin hop for a sign-in that another site started. The session cookie is
 * SameSite=Strict by default, and a cross-site navigation to /auth/login arrives without it,
 * as does the provider's redirect back to the callback: the gateway could then neither note
 * nor end the session the browser already holds, and every sign-in started from another site
 * left the old session alive. Answered once with a page of ours that asks for the same
 * /auth/login again, the browser makes the second request as a same-origin navigation and
 * sends the Strict cookie (Chromium: test/e2e/cross-site-sign-in.test.ts), so the sign-in
 * starts there, noting the session as any same-site one does.
 *
 * Only `Sec-Fetch-Site: cross-site` goes round: `none` (a typed URL, a bookmark) and
 * `same-site` already carry Strict cookies, and a browser that sends no Fetch Metadata is left
 * as it was (there, a cross-site start still leaves the old session alive). A subresource
 * request never gets here: login-navigation.ts refuses it first. A meta refresh, not a script:
 * the CSP allows no inline script; with SameSite=Lax configured nothing goes round.
 */
import { randomBytes } from 'node:crypto';
import type { Request, Response } from 'express';
import type { Config } from '../config/load.js';
import type { LoginQuery } from './login-params.js';
import { escapeHtml } from './error-handler.js';
import { loginCookieClearOptions, loginCookieName, loginCookieOptions, readCookies } from './session-cookie.js';

/**
 * Set with the page and cleared by the arrival it asks for: a browser that would call the
 * refresh cross-site again (and so never send the Strict cookie) goes round once, not forever.
 * It holds a nonce that the page's URL carries (`bounce=`): only that arrival is let through.
 * A guard of any value let every cross-site start through for a minute, so a page that sent
 * the browser to /auth/login twice started a sign-in that noted nothing, and the session the
 * browser held lived on. A login cookie by name (the proxy strips those), never taken for a
 * transaction's: those are named by hex digests.
 */
const GUARD_SUFFIX = 'bounce';

/** The guard's cookie name: a login cookie by name, but no sign-in in progress. */
export const bounceGuardName = (config: Config): string => loginCookieName(config, GUARD_SUFFIX);
/** The refresh is immediate; this only outlives a slow page load. */
const GUARD_TTL_SECONDS = 60;


/**
 * The same sign-in's URL, written from the parsed and validated query (nothing of the raw URL
 * is echoed), relative so that the browser stays on the origin it reached us on.
 */
function loginUrlOf(authPath: string, query: LoginQuery, nonce: string): string {
  const search = new URLSearchParams();
  const { params } = query;
  if (query.returnTo !== undefined) search.set('returnTo', query.returnTo);
  if (params.prompt) search.set('prompt', params.prompt.join(' '));
  if (params.loginHint !== undefined) search.set('login_hint', params.loginHint);
  if (params.uiLocales) search.set('ui_locales', params.uiLocales.join(' '));
  if (params.acrValues) search.set('acr_values', params.acrValues.join(' '));
  if (params.maxAge !== undefined) search.set('max_age', String(params.maxAge));
  search.set('bounce', nonce);
  return `${authPath}/login?${search.toString()}`;
}

function bouncePage(target: string): string {
  const href = escapeHtml(target);
  return (
    '<!doctype html><html><head><meta charset="utf-8">' +
    `<meta http-equiv="refresh" content="0;url=${href}"><title>Signing in</title></head>` +
    `<body><p><a href="${href}">Continue to sign in</a></p></body></html>`
  );
}

/**
 * Before anything of /auth/login counts (the rate limit, the transaction): answers with the
 * page and returns true when this arrival must go round once more; else clears the guard.
 */
export type LoginBounce = (req: Request, res: Response, query: LoginQuery, sessionCookieSent: boolean) => boolean;

export function createLoginBounce(config: Config): LoginBounce {
  const strict = config.session.sameSite === 'strict';
  const guardName = bounceGuardName(config);
  const clearOptions = loginCookieClearOptions(config);
  return function bounce(req, res, query, sessionCookieSent) {
    const guard = readCookies(req)[guardName];
    if (guard !== undefined) res.clearCookie(guardName, clearOptions);
    const guarded = guard !== undefined && guard === query.bounce;
    if (!strict || sessionCookieSent || guarded) return false;
    if (req.headers['sec-fetch-site'] !== 'cross-site') return false;
    const nonce = randomBytes(16).toString('base64url');
    res.cookie(guardName, nonce, loginCookieOptions(config, GUARD_TTL_SECONDS));
    res.status(200).type('html').send(bouncePage(loginUrlOf(config.server.authPath, query, nonce)));
    return true;
  };
}
