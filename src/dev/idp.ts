/**
 * Development OpenID provider (oidc-provider v9) for the demo (`npm start`) and the tests.
 *
 * Everything lives in memory and per instance: keys, cookie keys, accounts, grants and the
 * account page's own sign-in sessions. It is deliberately permissive about loopback (http
 * issuer, back-channel logout to 127.0.0.1) and must never face real users.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { calculateJwkThumbprint, createLocalJWKSet, exportJWK, generateKeyPair, jwtVerify, type JWK } from 'jose';
import Provider, { errors } from 'oidc-provider';
import type {
  Account,
  Adapter,
  AdapterPayload,
  ClientMetadata,
  Configuration,
  Grant,
  Interaction,
  KoaContextWithOIDC,
  ResourceServer,
} from 'oidc-provider';

export type { Provider };

// ---------------------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------------------

export interface DevUser {
  id: string;
  password: string;
  claims: { name: string; email: string; [k: string]: unknown };
}

export interface DevClient {
  client_id: string;
  client_secret: string;
  client_name?: string;
  redirect_uris?: string[];
  post_logout_redirect_uris?: string[];
  backchannel_logout_uri?: string;
  /** Default true when `backchannel_logout_uri` is set: logout tokens and ID tokens carry `sid`. */
  backchannel_logout_session_required?: boolean;
  grant_types?: string[];
  response_types?: string[];
  token_endpoint_auth_method?: string;
  scope?: string;
}

export interface DevTtl {
  AccessToken?: number;
  RefreshToken?: number;
  IdToken?: number;
  Session?: number;
  ClientCredentials?: number;
  Grant?: number;
  Interaction?: number;
  AuthorizationCode?: number;
}

export interface DevResourceServer {
  scope: string;
  audience?: string;
  accessTokenTTL?: number;
}

export interface DevIdpOptions {
  /** e.g. http://127.0.0.1:4000; the server must listen on the matching port. */
  issuer: string;
  clients: DevClient[];
  /** Default: alice / alice-password and bob / bob-password. */
  users?: DevUser[];
  /** Extra scopes and the plain words the consent page shows for them. */
  scopes?: Record<string, string>;
  /** Seconds. */
  ttl?: DevTtl;
  /** RFC 8707 resources: access tokens for them are JWTs whose `aud` is the resource. */
  resourceServers?: Record<string, DevResourceServer>;
  /** Resource used when an authorization or token request names none. */
  defaultResource?: string;
  /** Private signing keys; default: one fresh RS256 key. */
  jwks?: { keys: object[] };
  /** Default true: a reused rotated refresh token revokes the whole grant. */
  rotateRefreshToken?: boolean;
  /** Where the provider reports what it does; default: nowhere. */
  logger?: (line: string) => void;
  /** Allowed clock skew in seconds for incoming JWTs (client assertions, DPoP); default 5. */
  clockTolerance?: number;
  /**
   * Scopes the user declines on the consent page (as if unticked): recorded as rejected on the
   * grant, so they are neither granted nor asked for again. Default: none.
   */
  declinedScopes?: string[];
}

export interface DevIdpCounters {
  /** Token endpoint requests (successful or not) by grant_type. */
  grants: Record<string, number>;
  /** Token endpoint requests that ended in an error, by grant_type. */
  grantFailures: Record<string, number>;
  revocations: number;
  introspections: number;
  backchannelLogouts: number;
}

export interface ConnectedApplication {
  clientId: string;
  clientName: string;
  scopes: string[];
  resources: string[];
}

export interface DevIdpServer {
  port: number;
  close(): Promise<void>;
}

export interface DevIdp {
  issuer: string;
  provider: Provider;
  /** Node request listener serving the provider and the custom pages. */
  handler: (req: IncomingMessage, res: ServerResponse) => void;
  counters: DevIdpCounters;
  /** Public signing keys. */
  jwks: { keys: JWK[] };
  /** Private signing keys, for tests that sign tokens as the provider. */
  privateJwks: { keys: JWK[] };
  listen(port: number, host?: string): Promise<DevIdpServer>;
  /** What the account page's Revoke button does; resolves to the number of grants destroyed. */
  revokeGrantsFor(accountId: string, clientId: string): Promise<number>;
  connectedApplications(accountId: string): Promise<ConnectedApplication[]>;
  /**
   * JWT access tokens are self-contained, so oidc-provider refuses to introspect or revoke
   * them. This answers what introspection would: signature, issuer and expiry hold, and the
   * grant it was issued under still exists.
   */
  jwtAccessTokenActive(token: string): Promise<boolean>;
}

// ---------------------------------------------------------------------------------------------
// Defaults
// ---------------------------------------------------------------------------------------------

function defaultUsers(): DevUser[] {
  return [
    {
      id: 'alice',
      password: 'alice-password',
      claims: { name: 'Alice Liddell', given_name: 'Alice', family_name: 'Liddell', email: 'alice@example.com' },
    },
    {
      id: 'bob',
      password: 'bob-password',
      claims: { name: 'Bob Builder', given_name: 'Bob', family_name: 'Builder', email: 'bob@example.com' },
    },
  ];
}

const BUILTIN_SCOPE_WORDS: Readonly<Record<string, string>> = {
  openid: 'Confirm who you are',
  profile: 'See your name',
  email: 'See your email address',
  offline_access: 'Stay signed in when you are away (refresh tokens)',
};

const DEFAULT_TTL: Required<DevTtl> = {
  AccessToken: 600,
  RefreshToken: 24 * 60 * 60,
  IdToken: 60 * 60,
  Session: 24 * 60 * 60,
  ClientCredentials: 600,
  Grant: 14 * 24 * 60 * 60,
  Interaction: 10 * 60,
  AuthorizationCode: 60,
};

/**
 * The demo's one lifetime knob: DEV_IDP_ACCESS_TOKEN_TTL (seconds) shortens the dev provider's
 * access tokens (600 s by default), so a silent refresh can be watched (or tested against the
 * real `npm start`) without waiting ten minutes. Read here because dev/ may touch process.env.
 */
export function devTtlFromEnv(env: NodeJS.ProcessEnv = process.env): DevTtl {
  const raw = env.DEV_IDP_ACCESS_TOKEN_TTL;
  if (raw === undefined || raw === '') return {};
  const seconds = Number(raw);
  if (!Number.isSafeInteger(seconds) || seconds < 1) {
    throw new Error(`DEV_IDP_ACCESS_TOKEN_TTL must be a whole number of seconds (at least 1), not ${JSON.stringify(raw)}`);
  }
  return { AccessToken: seconds };
}

// oidc-provider's default route; the handler serves the provider at the root of its origin.
const AUTHORIZATION_PATH = '/auth';
const ACCOUNT_COOKIE = 'devidp_account';
const CSRF_COOKIE = 'devidp_csrf';
const MAX_FORM_BYTES = 16 * 1024;

// ---------------------------------------------------------------------------------------------
// In-memory storage
// ---------------------------------------------------------------------------------------------

// Models whose records die with their grant (revokeByGrantId).
const GRANT_BOUND = new Set([
  'AccessToken',
  'AuthorizationCode',
  'RefreshToken',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
  'PreAuthorizedCode',
]);

interface StoredEntry {
  model: string;
  id: string;
  payload: AdapterPayload;
  expiresAt: number;
}

/**
 * oidc-provider's bundled memory adapter is an LRU capped at 1000 records, which silently
 * drops grants under load, and it cannot list grants by account (the account page needs to).
 */
class DevStore {
  readonly #entries = new Map<string, StoredEntry>();
  readonly #grantMembers = new Map<string, Set<string>>();
  readonly #sessionUids = new Map<string, string>();
  readonly #userCodes = new Map<string, string>();
  readonly #grantsByAccount = new Map<string, Set<string>>();
  readonly #toleranceMs: number;
  #writes = 0;

  constructor(clockToleranceSeconds: number) {
    this.#toleranceMs = clockToleranceSeconds * 1000;
  }

  adapterFor(model: string): Adapter {
    const keyOf = (id: string): string => `${model}:${id}`;
    return {
      upsert: async (id, payload, expiresIn) => this.#upsert(model, id, payload, expiresIn),
      find: async (id) => this.#read(keyOf(id)),
      findByUid: async (uid) => this.#readIndexed(this.#sessionUids, uid, keyOf),
      findByUserCode: async (userCode) => this.#readIndexed(this.#userCodes, userCode, keyOf),
      consume: async (id) => this.#consume(keyOf(id)),
      destroy: async (id) => this.#remove(keyOf(id)),
      revokeByGrantId: async (grantId) => this.#removeGrantMembers(grantId, `${model}:`),
    };
  }

  grantIdsFor(accountId: string): string[] {
    return [...(this.#grantsByAccount.get(accountId) ?? [])];
  }

  /** Every token and code of the grant, then the grant itself. */
  destroyGrant(grantId: string): void {
    this.#removeGrantMembers(grantId, '');
    this.#remove(`Grant:${grantId}`);
  }

  #upsert(model: string, id: string, payload: AdapterPayload, expiresIn: number | undefined): void {
    const key = `${model}:${id}`;
    this.#remove(key);
    const expiresAt = typeof expiresIn === 'number' ? Date.now() + expiresIn * 1000 + this.#toleranceMs : Infinity;
    this.#entries.set(key, { model, id, payload, expiresAt });
    this.#index(key, model, id, payload);
    this.#writes += 1;
    if (this.#writes % 256 === 0) this.#sweep();
  }

  #index(key: string, model: string, id: string, payload: AdapterPayload): void {
    if (payload.grantId && GRANT_BOUND.has(model)) addTo(this.#grantMembers, payload.grantId, key);
    if (model === 'Session' && payload.uid) this.#sessionUids.set(payload.uid, id);
    if (payload.userCode) this.#userCodes.set(payload.userCode, id);
    if (model === 'Grant' && payload.accountId) addTo(this.#grantsByAccount, payload.accountId, id);
  }

  #read(key: string): AdapterPayload | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.#remove(key);
      return undefined;
    }
    return { ...entry.payload };
  }

  #readIndexed(index: Map<string, string>, value: string, keyOf: (id: string) => string): AdapterPayload | undefined {
    const id = index.get(value);
    return id === undefined ? undefined : this.#read(keyOf(id));
  }

  #consume(key: string): void {
    const entry = this.#entries.get(key);
    if (entry) entry.payload.consumed = Math.floor(Date.now() / 1000);
  }

  #remove(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    this.#entries.delete(key);
    const { model, id, payload } = entry;
    if (payload.grantId) removeFrom(this.#grantMembers, payload.grantId, key);
    if (payload.uid && this.#sessionUids.get(payload.uid) === id) this.#sessionUids.delete(payload.uid);
    if (payload.userCode && this.#userCodes.get(payload.userCode) === id) this.#userCodes.delete(payload.userCode);
    if (model === 'Grant' && payload.accountId) removeFrom(this.#grantsByAccount, payload.accountId, id);
  }

  #removeGrantMembers(grantId: string, keyPrefix: string): void {
    for (const key of [...(this.#grantMembers.get(grantId) ?? [])]) {
      if (key.startsWith(keyPrefix)) this.#remove(key);
    }
  }

  #sweep(): void {
    const now = Date.now();
    for (const [key, entry] of [...this.#entries]) {
      if (entry.expiresAt <= now) this.#remove(key);
    }
  }
}

function addTo(index: Map<string, Set<string>>, key: string, value: string): void {
  const set = index.get(key) ?? new Set<string>();
  set.add(value);
  index.set(key, set);
}

function removeFrom(index: Map<string, Set<string>>, key: string, value: string): void {
  const set = index.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) index.delete(key);
}

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const;

async function generateSigningKey(): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, kid: await calculateJwkThumbprint(jwk), alg: 'RS256', use: 'sig' };
}

function publicPart(jwk: JWK): JWK {
  const copy: Record<string, unknown> = { ...jwk };
  for (const member of PRIVATE_JWK_MEMBERS) delete copy[member];
  return copy as JWK;
}

async function signingKeys(supplied: { keys: object[] } | undefined): Promise<{ privateJwks: { keys: JWK[] }; jwks: { keys: JWK[] } }> {
  const keys = supplied ? (supplied.keys as JWK[]) : [await generateSigningKey()];
  return { privateJwks: { keys }, jwks: { keys: keys.map(publicPart) } };
}

// ---------------------------------------------------------------------------------------------
// Accounts
// ---------------------------------------------------------------------------------------------

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

function constantTimeEquals(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

function authenticate(users: Map<string, DevUser>, login: string, password: string): DevUser | undefined {
  const user = users.get(login) ?? [...users.values()].find((u) => u.claims.email === login);
  // Compare even for unknown users so timing does not reveal which logins exist.
  const ok = constantTimeEquals(user?.password ?? randomBytes(16).toString('hex'), password);
  return ok ? user : undefined;
}

function toAccount(user: DevUser): Account {
  return {
    accountId: user.id,
    claims: () => ({ email_verified: true, ...user.claims, sub: user.id }),
  };
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

function stringArray(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

function stringArrayRecord(value: unknown): Record<string, string[]> {
  if (!value || typeof value !== 'object') return {};
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, stringArray(v)]));
}

function splitScope(value: unknown): string[] {
  return typeof value === 'string' ? [...new Set(value.split(' ').filter(Boolean))] : [];
}

function increment(record: Record<string, number>, key: string): void {
  record[key] = (record[key] ?? 0) + 1;
}

function grantHasOfflineAccess(grant: Grant | undefined): boolean {
  return grant ? splitScope(grant.getOIDCScope()).includes('offline_access') : false;
}

function errorMessage(err: unknown): string {
  if (err instanceof Error) {
    const description = (err as { error_description?: unknown }).error_description;
    return typeof description === 'string' ? `${err.message} (${description})` : err.message;
  }
  return String(err);
}

// ---------------------------------------------------------------------------------------------
// HTML
// ---------------------------------------------------------------------------------------------

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

interface RenderedPage {
  html: string;
  nonce: string;
}

function renderPage(title: string, body: string): RenderedPage {
  const nonce = randomBytes(16).toString('base64');
  const html = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Development OpenID provider</title><style nonce="${nonce}">${STYLE}</style></head>
<body><p class="banner" role="note"><strong>Development OpenID provider</strong>: for local development and tests only, not for production.</p>
${body}
</body></html>`;
  return { html, nonce };
}

function pageHeaders(nonce: string): Record<string, string> {
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

function sendPage(res: ServerResponse, status: number, page: RenderedPage): void {
  res.writeHead(status, pageHeaders(page.nonce));
  res.end(page.html);
}

function scopeWords(scope: string, extra: Record<string, string>): string {
  return extra[scope] ?? BUILTIN_SCOPE_WORDS[scope] ?? `Use the permission “${scope}”`;
}

function loginPage(action: string, opts: { heading: string; subtitle: string; error?: string; login?: string; hint?: string; extraFields?: string; cancelAction?: string }): RenderedPage {
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

function consentPage(uid: string, clientName: string, userName: string, items: { scope: string; words: string }[], resources: string[]): RenderedPage {
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

function messagePage(title: string, message: string): RenderedPage {
  return renderPage(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>`);
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers
// ---------------------------------------------------------------------------------------------

function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    if (!cookies.has(name)) cookies.set(name, part.slice(eq + 1).trim());
  }
  return cookies;
}

function appendSetCookie(res: ServerResponse, cookie: string): void {
  const existing = res.getHeader('set-cookie');
  const list = Array.isArray(existing) ? existing : existing === undefined ? [] : [String(existing)];
  res.setHeader('set-cookie', [...list, cookie]);
}

function accountCookie(name: string, value: string, maxAgeSeconds: number): string {
  // Strict: the account page's cookies never ride along on a request started by another site.
  return `${name}=${value}; Path=/account; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}`;
}

function redirect(res: ServerResponse, location: string): void {
  res.writeHead(303, { location, 'cache-control': 'no-store', 'content-length': '0' });
  res.end();
}

class FormError extends Error {
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') throw new FormError(415, 'Expected a form submission.');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > MAX_FORM_BYTES) throw new FormError(413, 'The form is too large.');
    chunks.push(buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function listenOn(handler: DevIdp['handler'], port: number, host: string): Promise<DevIdpServer> {
  const server = http.createServer(handler);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const { port: bound } = server.address() as AddressInfo;
      resolve({ port: bound, close: () => closeServer(server) });
    });
  });
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

// ---------------------------------------------------------------------------------------------
// The instance
// ---------------------------------------------------------------------------------------------

interface AccountSession {
  accountId: string;
  expiresAt: number;
}

interface JwtRecord {
  grantId: string | undefined;
  expiresAt: number;
}

interface Env {
  options: DevIdpOptions;
  ttl: Required<DevTtl>;
  users: Map<string, DevUser>;
  store: DevStore;
  provider: Provider;
  counters: DevIdpCounters;
  jwks: { keys: JWK[] };
  scopeWords: Record<string, string>;
  accountSessions: Map<string, AccountSession>;
  jwtRecords: Map<string, JwtRecord>;
  log: (line: string) => void;
}

export async function createDevIdp(options: DevIdpOptions): Promise<DevIdp> {
  const ttl = { ...DEFAULT_TTL, ...options.ttl };
  const users = new Map((options.users ?? defaultUsers()).map((u) => [u.id, u]));
  const keys = await signingKeys(options.jwks);
  const store = new DevStore(options.clockTolerance ?? 5);
  const jwtRecords = new Map<string, JwtRecord>();
  const counters: DevIdpCounters = { grants: {}, grantFailures: {}, revocations: 0, introspections: 0, backchannelLogouts: 0 };
  const log = options.logger ?? (() => undefined);

  const provider = new Provider(options.issuer, buildConfiguration({ options, ttl, users, store, keys: keys.privateJwks, jwtRecords }));
  const env: Env = {
    options,
    ttl,
    users,
    store,
    provider,
    counters,
    jwks: keys.jwks,
    scopeWords: { ...collectResourceScopeWords(options), ...options.scopes },
    accountSessions: new Map(),
    jwtRecords,
    log,
  };
  installProviderMiddleware(env);
  reportProviderEvents(env);

  const providerCallback = provider.callback();
  const handler: DevIdp['handler'] = (req, res) => {
    route(env, req, res, providerCallback).catch((err: unknown) => failRequest(env, res, err));
  };

  return {
    issuer: options.issuer,
    provider,
    handler,
    counters,
    jwks: keys.jwks,
    privateJwks: keys.privateJwks,
    listen: (port, host = '127.0.0.1') => listenOn(handler, port, host),
    revokeGrantsFor: (accountId, clientId) => revokeGrantsFor(env, accountId, clientId),
    connectedApplications: (accountId) => connectedApplications(env, accountId),
    jwtAccessTokenActive: (token) => jwtAccessTokenActive(env, token),
  };
}

function collectResourceScopeWords(options: DevIdpOptions): Record<string, string> {
  const words: Record<string, string> = {};
  for (const [resource, rs] of Object.entries(options.resourceServers ?? {})) {
    for (const scope of splitScope(rs.scope)) words[scope] = `Use the permission “${scope}” at ${resource}`;
  }
  return words;
}

// ---------------------------------------------------------------------------------------------
// Provider configuration
// ---------------------------------------------------------------------------------------------

interface ConfigInput {
  options: DevIdpOptions;
  ttl: Required<DevTtl>;
  users: Map<string, DevUser>;
  store: DevStore;
  keys: { keys: JWK[] };
  jwtRecords: Map<string, JwtRecord>;
}

function toClientMetadata(client: DevClient): ClientMetadata {
  const grantTypes = client.grant_types ?? ['authorization_code', 'refresh_token'];
  const responseTypes = client.response_types ?? (grantTypes.includes('authorization_code') ? ['code'] : []);
  const metadata: ClientMetadata = {
    ...client,
    grant_types: grantTypes,
    response_types: responseTypes as ClientMetadata['response_types'],
    redirect_uris: client.redirect_uris ?? [],
    token_endpoint_auth_method: (client.token_endpoint_auth_method ?? 'client_secret_basic') as ClientMetadata['token_endpoint_auth_method'],
  };
  if (client.backchannel_logout_uri) {
    metadata.backchannel_logout_session_required = client.backchannel_logout_session_required ?? true;
  }
  return metadata;
}

function staticScopes(options: DevIdpOptions): string[] {
  // Scopes of a resource server stay resource scopes; declaring them here too would also put
  // them on the OpenID (userinfo) side of every grant.
  const resourceScopes = new Set(Object.values(options.resourceServers ?? {}).flatMap((rs) => splitScope(rs.scope)));
  const extra = Object.keys(options.scopes ?? {}).filter((s) => !resourceScopes.has(s));
  return [...new Set(['openid', 'offline_access', 'profile', 'email', ...extra])];
}

function resourceServerInfo(options: DevIdpOptions, indicator: string): ResourceServer {
  const rs = options.resourceServers?.[indicator];
  if (!rs) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
  return {
    scope: rs.scope,
    audience: rs.audience ?? indicator,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'RS256' } },
    ...(rs.accessTokenTTL !== undefined ? { accessTokenTTL: rs.accessTokenTTL } : {}),
  };
}

function pickDefaultResource(options: DevIdpOptions, oneOf: readonly string[] | undefined): string | undefined {
  if (!oneOf) return options.defaultResource;
  // Several granted resources and none named: prefer the configured one, else the first, so a
  // refresh without `resource` never fails with invalid_target.
  if (options.defaultResource && oneOf.includes(options.defaultResource)) return options.defaultResource;
  return oneOf[0];
}

function buildConfiguration(input: ConfigInput): Configuration {
  const { options, ttl, users } = input;
  return {
    clients: options.clients.map(toClientMetadata),
    adapter: (model: string) => input.store.adapterFor(model),
    jwks: input.keys as Configuration['jwks'],
    cookies: { keys: [randomBytes(32).toString('base64url'), randomBytes(32).toString('base64url')] },
    findAccount: (_ctx, sub) => {
      const user = users.get(sub);
      return user ? toAccount(user) : undefined;
    },
    claims: {
      openid: ['sub'],
      profile: ['name', 'given_name', 'family_name', 'preferred_username', 'updated_at'],
      email: ['email', 'email_verified'],
    },
    scopes: staticScopes(options),
    subjectTypes: ['public'],
    responseTypes: ['code'],
    pkce: { required: () => true },
    clockTolerance: options.clockTolerance ?? 5,
    // ID tokens carry the profile and email claims even when the access token is for the
    // userinfo endpoint: the gateway reads who signed in from the ID token.
    conformIdTokenClaims: false,
    rotateRefreshToken: options.rotateRefreshToken ?? true,
    // oidc-provider only keeps offline_access in an authorization request that also says
    // prompt=consent (see installProviderMiddleware); a grant that already holds it counts.
    issueRefreshToken: (ctx, client, code) =>
      client.grantTypeAllowed('refresh_token') && (code.scopes.has('offline_access') || grantHasOfflineAccess(ctx.oidc.entities.Grant)),
    expiresWithSession: (ctx, code) => !(code.scopes.has('offline_access') || grantHasOfflineAccess(ctx.oidc.entities.Grant)),
    ttl: {
      AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? ttl.AccessToken,
      ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? ttl.ClientCredentials,
      AuthorizationCode: ttl.AuthorizationCode,
      IdToken: ttl.IdToken,
      RefreshToken: ttl.RefreshToken,
      Session: ttl.Session,
      Grant: ttl.Grant,
      Interaction: ttl.Interaction,
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    formats: { customizers: { jwt: (_ctx, token, parts) => recordJwt(input.jwtRecords, (token as { grantId?: string }).grantId, parts.payload) } },
    renderError: (ctx, out) => {
      const page = messagePage('Something went wrong', `${out.error}: ${out.error_description ?? ''}`);
      ctx.set(pageHeaders(page.nonce));
      ctx.body = page.html;
    },
    // The provider only ever calls configured loopback clients (back-channel logout); its
    // default fetch refuses special-use addresses such as 127.0.0.1 (SSRF protection).
    fetch: (url, init) => {
      const { dispatcher: _ignored, ...rest } = (init ?? {}) as RequestInit & { dispatcher?: unknown };
      return globalThis.fetch(url, rest);
    },
    features: {
      devInteractions: { enabled: false },
      revocation: { enabled: true, allowedPolicy: (_ctx, client, token) => token.clientId === client.clientId },
      introspection: { enabled: true, allowedPolicy: (_ctx, client, token) => token.clientId === client.clientId },
      backchannelLogout: { enabled: true },
      clientCredentials: { enabled: true },
      userinfo: { enabled: true },
      rpInitiatedLogout: { enabled: true, logoutSource, postLogoutSuccessSource },
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo: (_ctx, indicator) => resourceServerInfo(options, indicator),
        defaultResource: (_ctx, _client, oneOf) => pickDefaultResource(options, oneOf),
        // Lets a refresh (or code exchange) without `resource` keep receiving a token for the
        // granted API instead of a userinfo-only token.
        useGrantedResource: () => true,
      },
    },
  };
}

function recordJwt(records: Map<string, JwtRecord>, grantId: string | undefined, payload: Record<string, unknown>): void {
  const { jti, exp } = payload;
  if (typeof jti !== 'string' || typeof exp !== 'number') return;
  const now = Date.now();
  if (records.size > 1000) {
    for (const [key, record] of [...records]) if (record.expiresAt <= now) records.delete(key);
  }
  records.set(jti, { grantId, expiresAt: exp * 1000 });
}

async function logoutSource(ctx: KoaContextWithOIDC, form: string): Promise<void> {
  const page = renderPage(
    'Sign out',
    `<h1>Sign out of the development provider?</h1>${form}
<div class="actions"><button autofocus type="submit" form="op.logoutForm" name="logout" value="yes">Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button></div>`,
  );
  ctx.set(pageHeaders(page.nonce));
  ctx.body = page.html;
}

async function postLogoutSuccessSource(ctx: KoaContextWithOIDC): Promise<void> {
  const page = messagePage('Signed out', 'You are signed out of the development provider.');
  ctx.set(pageHeaders(page.nonce));
  ctx.body = page.html;
}

// ---------------------------------------------------------------------------------------------
// Provider middleware and events
// ---------------------------------------------------------------------------------------------

function installProviderMiddleware(env: Env): void {
  const { provider } = env;
  provider.use(async (ctx, next) => {
    if (ctx.method === 'GET' && ctx.path === AUTHORIZATION_PATH) await askConsentForOfflineAccess(env, ctx);
    await next();
    countRequest(env.counters, ctx as unknown as KoaContextWithOIDC);
  });
}

/**
 * oidc-provider v9 silently drops offline_access from an authorization request that does not
 * carry prompt=consent. Standard clients (the gateway included) do not send it, so the first
 * time a client asks for offline access the request is turned into a consent request; once
 * the grant holds offline_access, issueRefreshToken looks at the grant instead.
 */
async function askConsentForOfflineAccess(env: Env, ctx: { querystring: string; req: IncomingMessage; res: ServerResponse }): Promise<void> {
  const query = new URLSearchParams(ctx.querystring);
  const prompts = splitScope(query.get('prompt'));
  const clientId = query.get('client_id');
  if (!splitScope(query.get('scope')).includes('offline_access') || !clientId) return;
  if (prompts.includes('none') || prompts.includes('consent') || query.has('request') || query.has('request_uri')) return;
  const client = await env.provider.Client.find(clientId);
  if (!client?.grantTypeAllowed('refresh_token')) return;
  if (await offlineAccessAlreadyGranted(env, ctx, clientId)) return;
  query.set('prompt', [...prompts, 'consent'].join(' '));
  ctx.querystring = query.toString();
}

async function offlineAccessAlreadyGranted(env: Env, ctx: { req: IncomingMessage; res: ServerResponse }, clientId: string): Promise<boolean> {
  const { provider } = env;
  const session = await provider.Session.get(provider.createContext(ctx.req, ctx.res));
  const grantId = session.accountId ? session.grantIdFor(clientId) : undefined;
  return grantId ? grantHasOfflineAccess(await provider.Grant.find(grantId)) : false;
}

function countRequest(counters: DevIdpCounters, ctx: KoaContextWithOIDC): void {
  const route = (ctx as { oidc?: { route?: string } }).oidc?.route;
  if (route === 'token') {
    const grantType = tokenRequestGrantType(ctx);
    increment(counters.grants, grantType);
    if (ctx.status >= 400) increment(counters.grantFailures, grantType);
  } else if (route === 'revocation') {
    counters.revocations += 1;
  } else if (route === 'introspection') {
    counters.introspections += 1;
  }
}

function tokenRequestGrantType(ctx: KoaContextWithOIDC): string {
  const value = ctx.oidc.params?.grant_type ?? ctx.oidc.body?.grant_type;
  return typeof value === 'string' ? value : 'unknown';
}

function clientIdOf(ctx: KoaContextWithOIDC | undefined): string {
  return ctx?.oidc?.client?.clientId ?? '-';
}

function reportProviderEvents(env: Env): void {
  const { provider, log, counters } = env;
  provider.on('grant.success', (ctx: KoaContextWithOIDC) => log(`grant.success ${tokenRequestGrantType(ctx)} client=${clientIdOf(ctx)}`));
  provider.on('grant.error', (ctx: KoaContextWithOIDC, err: unknown) => log(`grant.error ${tokenRequestGrantType(ctx)} client=${clientIdOf(ctx)} ${errorMessage(err)}`));
  provider.on('grant.revoked', (_ctx: KoaContextWithOIDC, grantId: string) => log(`grant.revoked ${grantId}`));
  provider.on('authorization.error', (ctx: KoaContextWithOIDC, err: unknown) => log(`authorization.error client=${clientIdOf(ctx)} ${errorMessage(err)}`));
  provider.on('revocation.error', (ctx: KoaContextWithOIDC, err: unknown) => log(`revocation.error client=${clientIdOf(ctx)} ${errorMessage(err)}`));
  provider.on('introspection.error', (ctx: KoaContextWithOIDC, err: unknown) => log(`introspection.error client=${clientIdOf(ctx)} ${errorMessage(err)}`));
  provider.on('end_session.success', (ctx: KoaContextWithOIDC) => log(`end_session.success client=${clientIdOf(ctx)}`));
  provider.on('end_session.error', (_ctx: KoaContextWithOIDC, err: unknown) => log(`end_session.error ${errorMessage(err)}`));
  provider.on('backchannel.success', (_ctx: unknown, client: { clientId: string }) => {
    counters.backchannelLogouts += 1;
    log(`backchannel.success client=${client.clientId}`);
  });
  provider.on('backchannel.error', (_ctx: unknown, err: unknown, client: { clientId: string }) => log(`backchannel.error client=${client.clientId} ${errorMessage(err)}`));
  provider.on('server_error', (_ctx: unknown, err: unknown) => log(`server_error ${errorMessage(err)}`));
  // Koa prints unhandled errors to stderr when nobody listens.
  (provider as unknown as NodeJS.EventEmitter).on('error', (err: unknown) => log(`error ${errorMessage(err)}`));
}

// ---------------------------------------------------------------------------------------------
// Routing
// ---------------------------------------------------------------------------------------------

const INTERACTION_ROUTE = /^\/interaction\/([A-Za-z0-9_-]+)(?:\/(login|confirm|abort))?$/;

async function route(env: Env, req: IncomingMessage, res: ServerResponse, providerCallback: DevIdp['handler']): Promise<void> {
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
    if (action === 'confirm') return submitConsent(env, req, res, uid);
    return abortInteraction(env, req, res, uid);
  }
  sendPage(res, 405, messagePage('Method not allowed', 'This page does not accept that request.'));
}

function failRequest(env: Env, res: ServerResponse, err: unknown): void {
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

// ---------------------------------------------------------------------------------------------
// Interaction pages (login, consent)
// ---------------------------------------------------------------------------------------------

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

async function clientNameFor(env: Env, clientId: unknown): Promise<string> {
  if (typeof clientId !== 'string') return 'An application';
  const client = await env.provider.Client.find(clientId);
  return client?.clientName ?? clientId;
}

function demoHint(env: Env): string | undefined {
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

async function showInteraction(env: Env, req: IncomingMessage, res: ServerResponse, uid: string): Promise<void> {
  const details = await loadInteraction(env, req, res, uid);
  if (!details) return;
  if (details.prompt.name === 'login') return renderLogin(env, res, details, 200);
  if (details.prompt.name === 'consent') return renderConsent(env, res, details);
  sendPage(res, 501, messagePage('Not supported', `The development provider cannot handle the "${details.prompt.name}" step.`));
}

async function submitLogin(env: Env, req: IncomingMessage, res: ServerResponse, uid: string): Promise<void> {
  const form = await readForm(req);
  const details = await loadInteraction(env, req, res, uid);
  if (!details) return;
  if (details.prompt.name !== 'login') return showInteraction(env, req, res, uid);
  const login = form.get('login') ?? '';
  const user = authenticate(env.users, login, form.get('password') ?? '');
  if (!user) return renderLogin(env, res, details, 401, 'Wrong username or password.', login);
  env.log(`login account=${user.id}`);
  await env.provider.interactionFinished(req, res, { login: { accountId: user.id } }, { mergeWithLastSubmission: false });
}

async function submitConsent(env: Env, req: IncomingMessage, res: ServerResponse, uid: string): Promise<void> {
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

async function abortInteraction(env: Env, req: IncomingMessage, res: ServerResponse, uid: string): Promise<void> {
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

// ---------------------------------------------------------------------------------------------
// Account page ("Connected applications")
// ---------------------------------------------------------------------------------------------

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

async function showAccount(env: Env, req: IncomingMessage, res: ServerResponse, revoked: string | null): Promise<void> {
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

async function accountLogin(env: Env, req: IncomingMessage, res: ServerResponse): Promise<void> {
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

async function accountRevoke(env: Env, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const form = await readForm(req);
  if (!csrfValid(req, form)) return sendPage(res, 403, messagePage('Request refused', 'The form was not submitted from this page. Reload it and try again.'));
  const accountId = await currentAccount(env, req, res);
  const clientId = form.get('client_id');
  if (!accountId || !clientId) return redirect(res, '/account');
  await revokeGrantsFor(env, accountId, clientId);
  redirect(res, `/account?revoked=${encodeURIComponent(clientId)}`);
}

async function accountLogout(env: Env, req: IncomingMessage, res: ServerResponse): Promise<void> {
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

async function connectedApplications(env: Env, accountId: string): Promise<ConnectedApplication[]> {
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

async function revokeGrantsFor(env: Env, accountId: string, clientId: string): Promise<number> {
  const grants = (await grantsOf(env, accountId)).filter((g) => g.clientId === clientId);
  for (const grant of grants) {
    if (grant.jti) env.store.destroyGrant(grant.jti);
  }
  env.log(`account revoke account=${accountId} client=${clientId} grants=${grants.length}`);
  return grants.length;
}

// ---------------------------------------------------------------------------------------------
// JWT access tokens
// ---------------------------------------------------------------------------------------------

async function jwtAccessTokenActive(env: Env, token: string): Promise<boolean> {
  let jti: unknown;
  try {
    const { payload } = await jwtVerify(token, createLocalJWKSet(env.jwks as { keys: JWK[] }), {
      issuer: env.options.issuer,
      typ: 'at+jwt',
    });
    jti = payload.jti;
  } catch {
    return false;
  }
  const record = typeof jti === 'string' ? env.jwtRecords.get(jti) : undefined;
  if (!record || record.expiresAt <= Date.now()) return false;
  if (record.grantId === undefined) return true;
  return (await env.provider.Grant.find(record.grantId)) !== undefined;
}
