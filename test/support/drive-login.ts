/**
 * Drives a sign-in through the gateway and the development provider like a user would:
 * follow redirects, fill the login form, answer the consent page. Form actions and hidden
 * fields are read from the HTML, so nothing depends on interaction ids or paths; of the
 * gateway only SPEC §3 is assumed (GET {authPath}/login answers a redirect to the provider).
 */
import type { BrowserClient, BrowserResponse, Hop } from './browser-client.js';

export interface ProviderLoginOptions {
  user?: string;
  password?: string;
  consent?: 'approve' | 'deny';
  /** The code to type on a second-factor page; default: the one the page shows. */
  otp?: string;
}

export interface SignInOptions extends ProviderLoginOptions {
  returnTo?: string;
  /** Default /auth/login. */
  loginPath?: string;
}

export interface SignInResult {
  /** Every request made, from the gateway's login endpoint to the page after the callback. */
  hops: Hop[];
  /** The last response: where the gateway's callback finally led (within the gateway). */
  final: BrowserResponse;
  authorizeUrl: URL;
  callbackUrl: string;
}

export interface StartedLogin {
  authorizeUrl: URL;
  gatewayResponse: BrowserResponse;
  /** The provider's answer to the authorization request (usually a redirect to its login page). */
  providerResponse: BrowserResponse;
}

export interface ProviderRun {
  callbackUrl: string;
  hops: Hop[];
}

export interface ParsedForm {
  id: string | undefined;
  /** Absolute URL. */
  action: string;
  method: string;
  fields: Record<string, string>;
  buttons: { name: string | undefined; value: string | undefined; text: string }[];
}

const MAX_PAGES = 10;
const MAX_REDIRECTS = 20;

// ---------------------------------------------------------------------------------------------
// HTML form parsing (just enough for server-rendered login and consent pages)
// ---------------------------------------------------------------------------------------------

function decodeEntities(value: string): string {
  return value.replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos|#39);/gi, (_m, entity: string) => {
    const lower = entity.toLowerCase();
    if (lower.startsWith('#x')) return String.fromCodePoint(parseInt(lower.slice(2), 16));
    if (lower.startsWith('#')) return String.fromCodePoint(Number(lower.slice(1)));
    return ({ amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" } as Record<string, string>)[lower] ?? '';
  });
}

function attributes(tag: string): Map<string, string> {
  const attrs = new Map<string, string>();
  for (const m of tag.matchAll(/([^\s=/>]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?/g)) {
    const name = m[1]?.toLowerCase();
    if (name) attrs.set(name, decodeEntities(m[2] ?? m[3] ?? m[4] ?? ''));
  }
  return attrs;
}

function stripTags(html: string): string {
  return decodeEntities(html.replace(/<[^>]*>/g, ' ')).replace(/\s+/g, ' ').trim();
}

function inputFields(formHtml: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const m of formHtml.matchAll(/<input\b([^>]*)>/gi)) {
    const attrs = attributes(m[1] ?? '');
    const name = attrs.get('name');
    const type = (attrs.get('type') ?? 'text').toLowerCase();
    if (!name || type === 'submit' || type === 'button') continue;
    if ((type === 'checkbox' || type === 'radio') && !attrs.has('checked')) continue;
    fields[name] = attrs.get('value') ?? '';
  }
  return fields;
}

function buttonsIn(html: string, formId?: string): ParsedForm['buttons'] {
  const buttons: ParsedForm['buttons'] = [];
  for (const m of html.matchAll(/<button\b([^>]*)>([\s\S]*?)<\/button>/gi)) {
    const attrs = attributes(m[1] ?? '');
    if (formId !== undefined && attrs.get('form') !== formId) continue;
    const type = (attrs.get('type') ?? 'submit').toLowerCase();
    if (type !== 'submit') continue;
    buttons.push({ name: attrs.get('name'), value: attrs.get('value'), text: stripTags(m[2] ?? '') });
  }
  return buttons;
}

/** Every form of the page, with hidden/text fields and submit buttons (also `form=`-linked ones). */
export function parseForms(html: string, pageUrl: string): ParsedForm[] {
  const forms: ParsedForm[] = [];
  for (const m of html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/gi)) {
    const attrs = attributes(m[1] ?? '');
    const body = m[2] ?? '';
    const id = attrs.get('id');
    forms.push({
      id,
      action: new URL(attrs.get('action') || pageUrl, pageUrl).href,
      method: (attrs.get('method') ?? 'get').toUpperCase(),
      fields: inputFields(body),
      buttons: [...buttonsIn(body), ...(id ? buttonsIn(html, id) : [])],
    });
  }
  return forms;
}

export function visibleText(html: string): string {
  return stripTags(html.replace(/<(style|script)\b[\s\S]*?<\/\1>/gi, ' '));
}

// ---------------------------------------------------------------------------------------------
// Provider pages
// ---------------------------------------------------------------------------------------------

const APPROVE = /^(approve|allow|accept|yes|continue|authori[sz]e)\b/i;
const DENY = /^(deny|decline|reject|no|cancel)\b/i;

function isLoginForm(form: ParsedForm): boolean {
  return form.method === 'POST' && 'password' in form.fields;
}

function consentChoice(forms: ParsedForm[], decision: 'approve' | 'deny'): { form: ParsedForm; fields: Record<string, string> } | undefined {
  const wanted = decision === 'approve' ? APPROVE : DENY;
  const suffix = decision === 'approve' ? /\/confirm$/ : /\/abort$/;
  for (const form of forms.filter((f) => f.method === 'POST')) {
    const button = form.buttons.find((b) => wanted.test(b.text));
    if (button) return { form, fields: { ...form.fields, ...(button.name ? { [button.name]: button.value ?? '' } : {}) } };
  }
  const byAction = forms.find((f) => f.method === 'POST' && suffix.test(new URL(f.action).pathname));
  return byAction ? { form: byAction, fields: byAction.fields } : undefined;
}

function describePage(response: BrowserResponse): string {
  return `${response.status} at ${response.url}: ${visibleText(response.text).slice(0, 300)}`;
}

interface ProviderState {
  client: BrowserClient;
  providerOrigin: string;
  hops: Hop[];
  loginAttempts: number;
}

/** Follows redirects while they stay at the provider; answers the URL that leaves it, if any. */
async function followAtProvider(state: ProviderState, response: BrowserResponse): Promise<{ page: BrowserResponse; leavingTo?: string }> {
  const run = await state.client.follow(response, {
    maxHops: MAX_REDIRECTS,
    stopBefore: (url) => url.origin !== state.providerOrigin,
  });
  state.hops.push(...run.hops.slice(1));
  return run.stoppedAt !== undefined ? { page: run.final, leavingTo: run.stoppedAt } : { page: run.final };
}

async function answerPage(state: ProviderState, page: BrowserResponse, opts: ProviderLoginOptions): Promise<BrowserResponse> {
  const forms = parseForms(page.text, page.url);
  // The development provider's second factor (step-up): the code is shown on the page.
  const otp = forms.find((f) => f.method === 'POST' && 'otp' in f.fields);
  if (otp) {
    const code = /id="otp-code">(\d{6})</.exec(page.text)?.[1];
    if (!code) throw new Error(`second-factor page without a code: ${describePage(page)}`);
    return submit(state, otp.action, { ...otp.fields, otp: opts.otp ?? code });
  }
  const login = forms.find(isLoginForm);
  if (login) {
    if (state.loginAttempts > 0) throw new Error(`sign-in at the provider failed: ${describePage(page)}`);
    state.loginAttempts += 1;
    const loginField = Object.keys(login.fields).find((n) => n !== 'password' && /login|user|email/i.test(n)) ?? 'login';
    return submit(state, login.action, {
      ...login.fields,
      [loginField]: opts.user ?? 'alice',
      password: opts.password ?? `${opts.user ?? 'alice'}-password`,
    });
  }
  const consent = consentChoice(forms, opts.consent ?? 'approve');
  if (consent) return submit(state, consent.form.action, consent.fields);
  throw new Error(`unexpected page at the provider: ${describePage(page)}`);
}

async function submit(state: ProviderState, action: string, fields: Record<string, string>): Promise<BrowserResponse> {
  const response = await state.client.post(action, { form: fields });
  state.hops.push({ url: response.url, status: response.status, location: response.headers.get('location') ?? undefined, response });
  return response;
}

/**
 * Starts at the authorization URL and answers the provider's pages until it redirects the
 * browser away (to the client's redirect_uri); that URL is returned, not requested.
 */
export async function authorizeAtProvider(client: BrowserClient, authorizeUrl: URL | string, opts: ProviderLoginOptions = {}): Promise<ProviderRun> {
  const url = new URL(authorizeUrl);
  const state: ProviderState = { client, providerOrigin: url.origin, hops: [], loginAttempts: 0 };
  let response = await submitGet(state, url);
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const { page: current, leavingTo } = await followAtProvider(state, response);
    if (leavingTo !== undefined) return { callbackUrl: leavingTo, hops: state.hops };
    response = await answerPage(state, current, opts);
  }
  throw new Error(`no redirect back to the client after ${MAX_PAGES} provider pages`);
}

async function submitGet(state: ProviderState, url: URL): Promise<BrowserResponse> {
  const response = await state.client.get(url);
  state.hops.push({ url: response.url, status: response.status, location: response.headers.get('location') ?? undefined, response });
  return response;
}

// ---------------------------------------------------------------------------------------------
// Gateway-facing helpers
// ---------------------------------------------------------------------------------------------

function loginUrl(gatewayUrl: string, opts: { returnTo?: string; loginPath?: string }): URL {
  const url = new URL(opts.loginPath ?? '/auth/login', gatewayUrl);
  if (opts.returnTo !== undefined) url.searchParams.set('returnTo', opts.returnTo);
  return url;
}

async function gatewayAuthorizeUrl(client: BrowserClient, gatewayUrl: string, opts: { returnTo?: string; loginPath?: string }): Promise<{ response: BrowserResponse; authorizeUrl: URL }> {
  const response = await client.get(loginUrl(gatewayUrl, opts));
  if (response.status < 300 || response.status >= 400 || response.redirectUrl === undefined) {
    throw new Error(`the gateway's login endpoint did not redirect: ${describePage(response)}`);
  }
  return { response, authorizeUrl: new URL(response.redirectUrl) };
}

/** GET {gateway}/auth/login, then the provider's first answer to the authorization request. */
export async function startLogin(client: BrowserClient, gatewayUrl: string, opts: { returnTo?: string; loginPath?: string } = {}): Promise<StartedLogin> {
  const { response, authorizeUrl } = await gatewayAuthorizeUrl(client, gatewayUrl, opts);
  const providerResponse = await client.get(authorizeUrl);
  return { authorizeUrl, gatewayResponse: response, providerResponse };
}

/** Login + consent at the provider; the callback URL it redirects to, not yet requested. */
export async function completeAtProvider(client: BrowserClient, authorizeUrl: URL | string, opts: ProviderLoginOptions = {}): Promise<string> {
  return (await authorizeAtProvider(client, authorizeUrl, opts)).callbackUrl;
}

/** A whole sign-in, ending wherever the gateway's callback leads within the gateway. */
export async function signIn(client: BrowserClient, gatewayUrl: string, opts: SignInOptions = {}): Promise<SignInResult> {
  const { response, authorizeUrl } = await gatewayAuthorizeUrl(client, gatewayUrl, opts);
  const hops: Hop[] = [{ url: response.url, status: response.status, location: response.headers.get('location') ?? undefined, response }];
  const provider = await authorizeAtProvider(client, authorizeUrl, opts);
  hops.push(...provider.hops);
  const callback = await client.get(provider.callbackUrl);
  const gatewayOrigin = new URL(gatewayUrl).origin;
  const rest = await client.follow(callback, { maxHops: MAX_REDIRECTS, stopBefore: (url) => url.origin !== gatewayOrigin });
  hops.push(...rest.hops);
  return { hops, final: rest.final, authorizeUrl, callbackUrl: provider.callbackUrl };
}
