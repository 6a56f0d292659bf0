// The demo SPA. It holds no token and stores nothing: its only credential is the gateway's
// HttpOnly cookie, which the browser attaches by itself to these same-origin calls.

import { watchSession } from './live.js';

/** Stops listening to the session's events (live.js) before this tab signs itself out. */
let stopWatching = () => undefined;

const $ = (id) => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`missing #${id}`);
  return el;
};

const view = {
  loading: $('loading'),
  message: $('message'),
  signedOut: $('signed-out'),
  signedIn: $('signed-in'),
  signIn: $('sign-in'),
  signOut: $('sign-out'),
  callApi: $('call-api'),
  userName: $('user-name'),
  userEmail: $('user-email'),
  sessionExpiry: $('session-expiry'),
  claimsBody: $('claims-body'),
  apiResult: $('api-result'),
  sessions: $('sessions'),
  sessionsList: $('sessions-list'),
};

/** Claims whose numbers are Unix times, shown as dates as well. */
const TIME_CLAIMS = new Set(['exp', 'iat', 'nbf', 'auth_time', 'updated_at']);

/**
 * Every call goes to the gateway with the CSRF header: a cross-site page cannot add it without
 * a CORS preflight, which the gateway never grants.
 */
async function gateway(method, path) {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    cache: 'no-store',
    headers: { 'x-csrf': '1', accept: 'application/json' },
  });
  let body = null;
  if (res.status !== 204) {
    const text = await res.text();
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
  }
  return { status: res.status, ok: res.ok, body };
}

function errorCode(reply) {
  return reply.body && typeof reply.body === 'object' && typeof reply.body.error === 'string'
    ? reply.body.error
    : `http_${reply.status}`;
}

function errorText(reply) {
  const code = errorCode(reply);
  const description = reply.body && typeof reply.body === 'object' ? reply.body.error_description : undefined;
  return typeof description === 'string' && description ? `${code}: ${description}` : code;
}

function isSessionGone(reply) {
  return reply.status === 401;
}

function say(text, kind = 'info') {
  view.message.textContent = text;
  view.message.dataset.kind = kind;
  view.message.hidden = !text;
}

function busy(button, isBusy) {
  button.disabled = isBusy;
  button.setAttribute('aria-busy', String(isBusy));
}

function showSignedOut(message, kind = 'info') {
  view.loading.hidden = true;
  view.signedIn.hidden = true;
  view.signedOut.hidden = false;
  view.claimsBody.replaceChildren();
  view.sessionsList.replaceChildren();
  if (message) say(message, kind);
}

function showSignedIn(user) {
  const claims = user.claims && typeof user.claims === 'object' ? user.claims : {};
  view.userName.textContent = String(claims.name ?? claims.preferred_username ?? claims.email ?? user.sub ?? 'unknown user');
  view.userEmail.textContent = typeof claims.email === 'string' ? claims.email : '';
  view.userEmail.hidden = typeof claims.email !== 'string';
  if (user.sessionExpiresAt) {
    view.sessionExpiry.textContent = `This session ends at the latest on ${formatDate(user.sessionExpiresAt)}.`;
    view.sessionExpiry.hidden = false;
  }
  renderClaims({ sub: user.sub, ...claims, ...(Array.isArray(user.scopes) ? { scopes: user.scopes.join(' ') } : {}) });
  view.loading.hidden = true;
  view.signedOut.hidden = true;
  view.signedIn.hidden = false;
}

function formatDate(value) {
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

function claimValue(name, value) {
  if (TIME_CLAIMS.has(name) && typeof value === 'number') return `${value} (${formatDate(value * 1000)})`;
  if (typeof value === 'string') return value;
  return JSON.stringify(value);
}

function renderClaims(claims) {
  // textContent only: claim values come from the provider and are never markup.
  const rows = Object.keys(claims)
    .filter((name) => claims[name] !== undefined)
    .sort()
    .map((name) => {
      const row = document.createElement('tr');
      const key = document.createElement('th');
      key.scope = 'row';
      key.textContent = name;
      const value = document.createElement('td');
      value.textContent = claimValue(name, claims[name]);
      row.append(key, value);
      return row;
    });
  view.claimsBody.replaceChildren(...rows);
}

const BROWSERS = [
  ['Edge', /Edg\/(\d+)/],
  ['Firefox', /Firefox\/(\d+)/],
  ['Chrome', /Chrome\/(\d+)/],
  ['Safari', /Version\/(\d+)[^ ]* (Mobile\/\S+ )?Safari\//],
];

function describeAgent(userAgent) {
  if (typeof userAgent !== 'string' || !userAgent) return 'Unknown browser';
  const browser = BROWSERS.map(([name, pattern]) => {
    const match = pattern.exec(userAgent);
    return match ? `${name} ${match[1]}` : undefined;
  }).find(Boolean);
  const system = /(Windows|Mac OS X|Android|iPhone|iPad|Linux)/.exec(userAgent)?.[1]?.replace('Mac OS X', 'macOS');
  if (!browser) return userAgent.slice(0, 80);
  return system ? `${browser} on ${system}` : browser;
}

async function loadSessions() {
  const reply = await gateway('GET', '/auth/sessions');
  // Gateways without session management answer 404: the section simply stays hidden.
  if (reply.status === 404 || !reply.ok || !Array.isArray(reply.body)) {
    if (isSessionGone(reply)) return showSignedOut('Your session has ended, sign in again.');
    view.sessions.hidden = true;
    return;
  }
  const items = reply.body.map((session) => {
    const item = document.createElement('li');
    item.className = session.current ? 'session current' : 'session';
    const label = document.createElement('span');
    label.className = 'session-label';
    const what = describeAgent(session.userAgent);
    label.textContent = `${what}${session.current ? ' (this browser)' : ''}`;
    const when = document.createElement('span');
    when.className = 'muted';
    when.textContent = `signed in ${formatDate(session.createdAt)}, last active ${formatDate(session.lastActiveAt)}`;
    const end = document.createElement('button');
    end.type = 'button';
    end.className = 'button small';
    end.dataset.testid = 'session-end';
    end.textContent = 'End';
    end.setAttribute('aria-label', `End the session: ${what}${session.current ? ', this browser' : ''}`);
    end.addEventListener('click', () => endSession(session, end));
    item.append(label, when, end);
    return item;
  });
  view.sessionsList.replaceChildren(...items);
  view.sessions.hidden = false;
}

async function endSession(session, button) {
  busy(button, true);
  try {
    const reply = await gateway('DELETE', `/auth/sessions/${encodeURIComponent(session.id)}`);
    if (reply.status === 204 || reply.status === 404) {
      if (session.current) return showSignedOut('You ended the session in this browser.');
      say(reply.status === 204 ? 'Session ended.' : 'That session had already ended.');
      return await loadSessions();
    }
    if (isSessionGone(reply)) return showSignedOut('Your session has ended, sign in again.');
    say(`Could not end the session (${errorText(reply)}).`, 'error');
  } catch {
    say('The gateway could not be reached. Check your connection and try again.', 'error');
  } finally {
    busy(button, false);
  }
}

/**
 * Calls `GET path` for `button` and shows the answer in `output`. `label` names the API in the
 * failure sentence; `quiet` leaves the page's message alone (the ledger block shows answers in
 * `output` only). `onError(reply)` may take a failure first and return true when it did (the
 * step-up navigation); a login_required after that shows the signed-out page.
 */
async function callAndShow({ button, output, path, label, quiet = false, onError = () => false }) {
  busy(button, true);
  output.textContent = `Calling GET ${path}…`;
  try {
    const reply = await gateway('GET', path);
    output.textContent = reply.ok ? JSON.stringify(reply.body, null, 2) : `${reply.status} ${errorText(reply)}`;
    output.dataset.kind = reply.ok ? 'ok' : 'error';
    if (reply.ok) {
      if (!quiet) say('');
      return;
    }
    if (onError(reply)) return;
    if (errorCode(reply) === 'login_required') return showSignedOut('Your session has ended, sign in again.');
    if (!quiet) say(`The ${label} call failed: ${errorCode(reply)}.`, 'error');
  } catch {
    output.textContent = 'network_error';
    output.dataset.kind = 'error';
    if (!quiet) say('The gateway could not be reached. Check your connection and try again.', 'error');
  } finally {
    busy(button, false);
  }
}

const callApi = () => callAndShow({ button: view.callApi, output: view.apiResult, path: '/api/hello', label: 'API' });

async function signOut() {
  busy(view.signOut, true);
  stopWatching(); // this tab's own sign-out is no news to it
  try {
    const reply = await gateway('POST', '/auth/logout');
    if (reply.ok && reply.body && typeof reply.body.logoutUrl === 'string') {
      // The provider's end-session page (or "/"), which brings the browser back here.
      location.assign(reply.body.logoutUrl);
      return;
    }
    if (isSessionGone(reply)) return showSignedOut('You are signed out.');
    say(`Sign-out failed (${errorText(reply)}). Try again.`, 'error');
  } catch {
    say('The gateway could not be reached. Check your connection and try again.', 'error');
  } finally {
    busy(view.signOut, false);
  }
}

/** The gateway sends a declined or failed sign-in back here as `?error=<code>`. */
function takeSignInError() {
  const params = new URLSearchParams(location.search);
  const code = params.get('error');
  if (code === null) return;
  if (code === 'access_denied') {
    say('You declined the request, so you are not signed in. Sign in again whenever you like.', 'warning');
  } else {
    say(`Signing in did not work (${code.replace(/[^a-z0-9_]/gi, '').slice(0, 64) || 'unknown_error'}). Please try again.`, 'error');
  }
  for (const name of ['error', 'error_description', 'error_uri']) params.delete(name);
  const query = params.toString();
  history.replaceState(history.state, '', `${location.pathname}${query ? `?${query}` : ''}${location.hash}`);
}

function wireSignInLink() {
  // Come back to the page the user is on; the gateway accepts only same-origin paths anyway.
  const path = location.pathname.startsWith('/') && !location.pathname.startsWith('//') ? location.pathname : '/';
  // Slashes stay readable (`returnTo=/`); everything else that could end the parameter is escaped.
  view.signIn.setAttribute('href', `/auth/login?returnTo=${encodeURIComponent(path).replace(/%2F/g, '/')}`);
}

// ---------------------------------------------------------------------------------------------
// Step-up (RFC 9470): begin. The payments API needs a sign-in with the provider's second factor;
// the gateway answers 401 step_up_required with a loginUrl, which this page follows.
// ---------------------------------------------------------------------------------------------

const stepUpView = {
  level: $('auth-level'),
  call: $('step-up-call'),
  result: $('step-up-result'),
};

function showAuthLevel(user) {
  const acr = typeof user.acr === 'string' ? user.acr : 'not reported by the provider';
  const when = typeof user.authTime === 'string' ? `, at ${formatDate(user.authTime)}` : '';
  stepUpView.level.textContent = `Signed in with: ${acr}${when}`;
}

/** The gateway's loginUrl, back to this page: only ever a path on this origin. */
function stepUpLoginUrl(loginUrl) {
  if (typeof loginUrl !== 'string' || !loginUrl.startsWith('/') || loginUrl.startsWith('//')) return undefined;
  const url = new URL(loginUrl, location.origin);
  if (url.origin !== location.origin) return undefined;
  url.searchParams.set('returnTo', location.pathname);
  return `${url.pathname}${url.search}`;
}

/** An upstream's step-up challenge: to the provider for the stronger sign-in, then back here. */
function stepUpOnChallenge(reply) {
  if (errorCode(reply) !== 'step_up_required') return false;
  const next = stepUpLoginUrl(reply.body.loginUrl);
  if (!next) return false;
  say('This API needs a stronger sign-in: taking you to the provider…', 'warning');
  location.assign(next);
  return true;
}

const callStepUpApi = () =>
  callAndShow({ button: stepUpView.call, output: stepUpView.result, path: '/api/payments', label: 'payments API', onError: stepUpOnChallenge });

stepUpView.call.addEventListener('click', callStepUpApi);

// Step-up: end. ------------------------------------------------------------------------------

async function refreshUser() {
  const reply = await gateway('GET', '/auth/user').catch(() => undefined);
  if (!reply?.ok || !reply.body || typeof reply.body !== 'object') return;
  showSignedIn(reply.body);
  showAuthLevel(reply.body);
}

async function start() {
  wireSignInLink();
  takeSignInError();
  view.callApi.addEventListener('click', callApi);
  view.signOut.addEventListener('click', signOut);
  try {
    const reply = await gateway('GET', '/auth/user');
    if (reply.ok && reply.body && typeof reply.body === 'object') {
      showSignedIn(reply.body);
      showAuthLevel(reply.body); // step-up
      // Live session (issue 16): a banner when signed out elsewhere, a countdown before the timeout.
      stopWatching = watchSession({
        banner: $('live-banner'),
        countdown: $('live-countdown'),
        onSignedOut: () => showSignedOut(),
        // A new sign-in of this browser (another tab, a step-up): show the new session's user and level.
        onReplaced: () => void refreshUser(),
      });
      await loadSessions();
    } else if (reply.status === 401) {
      showSignedOut();
    } else {
      showSignedOut(`The gateway could not tell whether you are signed in (${errorText(reply)}).`, 'error');
    }
  } catch {
    showSignedOut('The gateway could not be reached. Check your connection and reload the page.', 'error');
  }
}

// ---- DPoP and token exchange (issue 15, part 2) ------------------------------------------------
// "Call API" above already goes through DPoP in the demo (the API's answer says scheme "dpop").
// This button calls /api/ledger, whose token the gateway exchanges for one meant for the ledger
// (RFC 8693): the answer shows its own audience and scope. Kept in one block on purpose.
const callLedger = (event) =>
  callAndShow({ button: event.currentTarget, output: view.apiResult, path: '/api/ledger/balance', label: 'ledger API', quiet: true });
document.getElementById('call-ledger')?.addEventListener('click', callLedger);
// ---- end of DPoP and token exchange ------------------------------------------------------------

start();
