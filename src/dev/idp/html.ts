/**
 * HTML pages: escaping, the page frame with its nonce-based CSP, and the login, consent and
 * message pages.
 */
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';

const HTML_ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] ?? c);
}

const STYLE = `
body{font-family:system-ui,sans-serif;max-width:36rem;margin:1.5rem auto;padding:0 1rem;color:#1d2330;line-height:1.4}
.banner{background:#fff3cd;border:1px solid #d9a400;padding:.5rem .75rem;border-radius:4px;font-size:.9rem}
label{display:block;margin:.6rem 0}input{display:block;width:100%;padding:.4rem;box-sizing:border-box;margin-top:.2rem}
button{padding:.45rem 1.1rem;cursor:pointer}.actions{display:flex;gap:.75rem;margin:1rem 0}.actions form{margin:0}
.error{color:#a40000;font-weight:600}.notice{color:#185c2a}.hint{color:#555;font-size:.9rem}
ul.scopes li{margin:.35rem 0}code{color:#555}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.45rem;text-align:left;vertical-align:top}`;

export interface RenderedPage {
  html: string;
  nonce: string;
}

export function renderPage(title: string, body: string): RenderedPage {
  const nonce = randomBytes(16).toString('base64');
  const html = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Development OpenID provider</title><style nonce="${nonce}">${STYLE}</style></head>
<body><p class="banner" role="note"><strong>Development OpenID provider</strong>: for local development and tests only, not for production.</p>
${body}
</body></html>`;
  return { html, nonce };
}

export function pageHeaders(nonce: string): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    // No form-action: Chrome applies it to the redirects after a submit, and the consent
    // form's answer is a redirect chain back to the client.
    'content-security-policy': `default-src 'none'; style-src 'nonce-${nonce}'; base-uri 'none'; frame-ancestors 'none'`,
  };
}

export function sendPage(res: ServerResponse, status: number, page: RenderedPage): void {
  res.writeHead(status, pageHeaders(page.nonce));
  res.end(page.html);
}

const BUILTIN_SCOPE_WORDS: Readonly<Record<string, string>> = {
  openid: 'Confirm who you are',
  profile: 'See your name',
  email: 'See your email address',
  offline_access: 'Stay signed in when you are away (refresh tokens)',
};

export function scopeWords(scope: string, extra: Record<string, string>): string {
  return extra[scope] ?? BUILTIN_SCOPE_WORDS[scope] ?? `Use the permission “${scope}”`;
}

export function loginPage(action: string, opts: { heading: string; subtitle: string; error?: string; login?: string; hint?: string; extraFields?: string; cancelAction?: string }): RenderedPage {
  const error = opts.error ? `<p class="error" role="alert">${escapeHtml(opts.error)}</p>` : '';
  const cancel = opts.cancelAction
    ? `<form method="post" action="${escapeHtml(opts.cancelAction)}"><button type="submit">Cancel</button></form>`
    : '';
  const hint = opts.hint ? `<p class="hint">${escapeHtml(opts.hint)}</p>` : '';
  return renderPage(
    opts.heading,
    `<h1>${escapeHtml(opts.heading)}</h1><p>${opts.subtitle}</p>${error}
<form method="post" action="${escapeHtml(action)}">${opts.extraFields ?? ''}
<label>Username <input name="login" autocomplete="username" required autofocus value="${escapeHtml(opts.login ?? '')}"></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required></label>
<div class="actions"><button type="submit">Sign in</button></div></form>${cancel}${hint}`,
  );
}

export function consentPage(uid: string, clientName: string, userName: string, items: { scope: string; words: string }[], resources: string[]): RenderedPage {
  const list = items
    .map((i) => `<li><span class="scope-description">${escapeHtml(i.words)}</span> <code>${escapeHtml(i.scope)}</code></li>`)
    .join('');
  const apis = resources.length
    ? `<p class="hint">For: ${resources.map((r) => `<code>${escapeHtml(r)}</code>`).join(', ')}</p>`
    : '';
  const base = `/interaction/${encodeURIComponent(uid)}`;
  return renderPage(
    'Allow access?',
    `<h1>Allow access?</h1><p>Signed in as <strong>${escapeHtml(userName)}</strong>.</p>
<p><strong>${escapeHtml(clientName)}</strong> would like to:</p><ul class="scopes">${list}</ul>${apis}
<div class="actions"><form method="post" action="${base}/confirm"><button type="submit" name="decision" value="approve">Approve</button></form>
<form method="post" action="${base}/abort"><button type="submit" name="decision" value="deny">Deny</button></form></div>`,
  );
}

export function messagePage(title: string, message: string): RenderedPage {
  return renderPage(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>`);
}
