/**
 * The development provider's second factor, for step-up (RFC 9470) demos and tests: a sign-in
 * whose authorization request asks for the stronger `acr` (acr_values, or the claims parameter)
 * takes a one-time code after the password. The code is shown on the page itself: this is a
 * demo of the protocol, not of a second factor. A password alone yields ACR.password.
 */
import { randomInt } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Interaction } from 'oidc-provider';
import type { Env } from './env.js';
import { splitScope } from './helpers.js';
import { escapeHtml, renderPage, sendPage, type RenderedPage } from './html.js';
import { readForm } from './http.js';

export const ACR = {
  password: 'urn:bff:acr:pwd',
  mfa: 'urn:bff:acr:mfa',
} as const;

/** A code waits this long, and allows this many wrong tries, before the sign-in starts over. */
const CODE_TTL_MS = 5 * 60 * 1000;
const MAX_TRIES = 3;

export interface PendingSecondFactor {
  accountId: string;
  code: string;
  expiresAt: number;
  tries: number;
}

/** The acr values the request names, from acr_values and from claims.id_token.acr (OIDC Core §5.5.1.1). */
function requestedAcrs(params: Interaction['params']): string[] {
  const acrs = splitScope(params.acr_values);
  if (typeof params.claims === 'string') {
    try {
      const acr = (JSON.parse(params.claims) as { id_token?: { acr?: { value?: unknown; values?: unknown } } }).id_token?.acr;
      if (typeof acr?.value === 'string') acrs.push(acr.value);
      if (Array.isArray(acr?.values)) acrs.push(...acr.values.filter((v): v is string => typeof v === 'string'));
    } catch {
      // oidc-provider has already refused malformed claims; nothing asked here.
    }
  }
  return acrs;
}

export function wantsSecondFactor(details: Interaction): boolean {
  return requestedAcrs(details.params).includes(ACR.mfa);
}

export function secondFactorPage(uid: string, code: string, error?: string): RenderedPage {
  const action = `/interaction/${encodeURIComponent(uid)}/otp`;
  const problem = error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : '';
  return renderPage(
    'Second factor',
    `<h1>Second factor</h1><p>This application asks for a stronger sign-in.</p>${problem}
<p class="hint">Your one-time code (shown here because this is a demo): <strong id="otp-code">${escapeHtml(code)}</strong></p>
<form method="post" action="${escapeHtml(action)}">
<label>One-time code <input name="otp" inputmode="numeric" autocomplete="one-time-code" required autofocus></label>
<div class="actions"><button type="submit">Verify</button></div></form>`,
  );
}

/** After a correct password for a request that asks for ACR.mfa: a fresh code, and its page. */
export function startSecondFactor(env: Env, res: ServerResponse, uid: string, accountId: string): void {
  const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
  const now = Date.now();
  // Abandoned sign-ins leave their codes behind: swept here, so the map stays small.
  for (const [key, pending] of env.secondFactors) if (pending.expiresAt < now) env.secondFactors.delete(key);
  env.secondFactors.set(uid, { accountId, code, expiresAt: now + CODE_TTL_MS, tries: 0 });
  env.log(`second factor asked account=${accountId}`);
  sendPage(res, 200, secondFactorPage(uid, code));
}

/**
 * The posted code: right → the login finishes with ACR.mfa; wrong → the page again, until the
 * tries run out; expired or unknown → undefined (the caller shows the login page again).
 */
export async function submitSecondFactor(env: Env, req: IncomingMessage, res: ServerResponse, details: Interaction): Promise<boolean> {
  const form = await readForm(req);
  const pending = env.secondFactors.get(details.uid);
  if (!pending || pending.expiresAt < Date.now()) {
    env.secondFactors.delete(details.uid);
    return false;
  }
  if (form.get('otp') !== pending.code) {
    pending.tries += 1;
    if (pending.tries >= MAX_TRIES) {
      env.secondFactors.delete(details.uid);
      return false;
    }
    sendPage(res, 401, secondFactorPage(details.uid, pending.code, 'That code is not right.'));
    return true;
  }
  env.secondFactors.delete(details.uid);
  env.log(`login account=${pending.accountId} acr=${ACR.mfa}`);
  await env.provider.interactionFinished(
    req,
    res,
    { login: { accountId: pending.accountId, acr: ACR.mfa, amr: ['pwd', 'otp'] } },
    { mergeWithLastSubmission: false },
  );
  return true;
}
