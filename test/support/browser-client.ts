/**
 * A tiny browser for tests: a cookie jar per origin, manual redirects and plain response
 * objects. Enough of RFC 6265 for loopback servers (Path, Max-Age, Expires); SameSite is
 * honoured only when a request says it is cross-site (`crossSite: true`).
 *
 * https (`ca` given): requests go through node:https trusting that certificate, since fetch
 * offers no per-request trust anchor. With `honourSecure` the jar also keeps the Secure and
 * cookie-prefix rules of RFC 6265bis (§4.1.3, §5.4 step 19-20, §5.8.3): a Secure cookie is
 * stored only from https and sent only over https, and a `__Host-` cookie is refused unless
 * Secure, Path=/ and without Domain. Off by default: tests that talk plain http to a gateway
 * whose publicUrl is https rely on the jar sending its `__Host-` cookies anyway.
 *
 * Fetch Metadata: `crossSite: true` sends what a browser's cross-site navigation sends
 * (`Sec-Fetch-Site: cross-site`, `Sec-Fetch-Mode: navigate`, `Sec-Fetch-Dest: document`) unless
 * the test sets its own. A request that carries `Sec-Fetch-Mode` goes through node:http(s):
 * Node's fetch replaces that header with `cors` on every request.
 */
import http from 'node:http';
import https from 'node:https';

export type SameSite = 'strict' | 'lax' | 'none';

export interface StoredCookie {
  name: string;
  value: string;
  path: string;
  /** Epoch milliseconds; undefined for a session cookie. */
  expiresAt: number | undefined;
  sameSite: SameSite;
  httpOnly: boolean;
  secure: boolean;
  /** The Set-Cookie carried a Domain attribute (the jar is per origin and does not widen it). */
  domain: string | undefined;
}

export interface BrowserResponse {
  status: number;
  headers: Headers;
  /** The URL this response answered. */
  url: string;
  text: string;
  json<T = unknown>(): T;
  /** The Location header resolved against `url`, for redirects. */
  redirectUrl: string | undefined;
}

export interface BrowserRequestInit {
  headers?: Record<string, string> | Headers;
  /** Sent as application/x-www-form-urlencoded. */
  form?: Record<string, string> | URLSearchParams;
  /** Sent as application/json. */
  json?: unknown;
  body?: string | Uint8Array;
  /** Simulate a request started by another site: SameSite cookies are withheld accordingly. */
  crossSite?: boolean;
  /** Send no cookie from the jar. */
  omitCookies?: boolean;
  timeoutMs?: number;
}

export interface Hop {
  url: string;
  status: number;
  /** The raw Location header, as the server sent it. */
  location: string | undefined;
  response: BrowserResponse;
}

export interface FollowOptions {
  maxHops?: number;
  /** Stop before requesting a URL for which this answers true; its href is in `stoppedAt`. */
  stopBefore?: (url: URL) => boolean;
  headers?: Record<string, string>;
  crossSite?: boolean;
}

export interface FollowResult {
  /** The starting response first, then one entry per request made. */
  hops: Hop[];
  final: BrowserResponse;
  stoppedAt: string | undefined;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

function originOf(url: string | URL): string {
  return new URL(url).origin;
}

/** RFC 6265 §5.1.4 default-path. */
function defaultPath(pathname: string): string {
  if (!pathname.startsWith('/')) return '/';
  const last = pathname.lastIndexOf('/');
  return last <= 0 ? '/' : pathname.slice(0, last);
}

/** RFC 6265 §5.1.4 path-match. */
function pathMatches(requestPath: string, cookiePath: string): boolean {
  if (requestPath === cookiePath) return true;
  if (!requestPath.startsWith(cookiePath)) return false;
  return cookiePath.endsWith('/') || requestPath.charAt(cookiePath.length) === '/';
}

function parseSameSite(value: string | undefined): SameSite {
  const lower = value?.toLowerCase();
  // Browsers treat a cookie without SameSite as Lax.
  return lower === 'strict' || lower === 'none' ? lower : 'lax';
}

interface ParsedSetCookie {
  cookie: StoredCookie;
  expired: boolean;
}

function parseSetCookie(header: string, requestUrl: URL, now: number): ParsedSetCookie | undefined {
  const [pair = '', ...attributes] = header.split(';');
  const eq = pair.indexOf('=');
  if (eq <= 0) return undefined;
  const attrs = new Map<string, string>();
  for (const attribute of attributes) {
    const i = attribute.indexOf('=');
    const key = (i < 0 ? attribute : attribute.slice(0, i)).trim().toLowerCase();
    attrs.set(key, i < 0 ? '' : attribute.slice(i + 1).trim());
  }
  const expiresAt = cookieExpiry(attrs, now);
  const path = attrs.get('path');
  return {
    cookie: {
      name: pair.slice(0, eq).trim(),
      value: pair.slice(eq + 1).trim(),
      path: path?.startsWith('/') ? path : defaultPath(requestUrl.pathname),
      expiresAt,
      sameSite: parseSameSite(attrs.get('samesite')),
      httpOnly: attrs.has('httponly'),
      secure: attrs.has('secure'),
      domain: attrs.get('domain'),
    },
    expired: expiresAt !== undefined && expiresAt <= now,
  };
}

function cookieExpiry(attrs: Map<string, string>, now: number): number | undefined {
  const maxAge = attrs.get('max-age');
  // Max-Age wins over Expires (RFC 6265 §5.3 step 3).
  if (maxAge !== undefined && /^-?\d+$/.test(maxAge)) return now + Number(maxAge) * 1000;
  const expires = attrs.get('expires');
  if (expires === undefined) return undefined;
  const parsed = Date.parse(expires);
  return Number.isNaN(parsed) ? undefined : parsed;
}

function toResponse(url: string, status: number, headers: Headers, text: string): BrowserResponse {
  const raw = headers.get('location');
  return {
    status,
    headers,
    url,
    text,
    json<T>() {
      return JSON.parse(text) as T;
    },
    redirectUrl: raw === null ? undefined : new URL(raw, url).href,
  };
}

/** RFC 6265bis: may a browser store this cookie, received from `url`? */
function acceptable(cookie: StoredCookie, url: URL): boolean {
  const https = url.protocol === 'https:';
  if (cookie.secure && !https) return false;
  if (cookie.name.startsWith('__Secure-') && !(cookie.secure && https)) return false;
  if (cookie.name.startsWith('__Host-')) return cookie.secure && https && cookie.path === '/' && cookie.domain === undefined;
  return true;
}

interface RawAnswer {
  status: number;
  headers: Headers;
  text: string;
}

/** One exchange over node:http(s), https trusting `ca` (bounded by `timeoutMs`); no content coding is asked for. */
function nodeExchange(target: URL, method: string, headers: Headers, body: string | Uint8Array | undefined, opts: { ca: string | undefined; localAddress: string | undefined; timeoutMs: number }): Promise<RawAnswer> {
  return new Promise<RawAnswer>((resolve, reject) => {
    const options = { method, headers: Object.fromEntries(headers), agent: false, ...(opts.localAddress ? { localAddress: opts.localAddress } : {}) };
    const req = target.protocol === 'https:' ? https.request(target, { ...options, ...(opts.ca ? { ca: opts.ca } : {}) }) : http.request(target, options);
    const timer = setTimeout(() => req.destroy(new Error(`no answer from ${target.href} within ${opts.timeoutMs} ms`)), opts.timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        clearTimeout(timer);
        const out = new Headers();
        for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) out.append(res.rawHeaders[i] as string, res.rawHeaders[i + 1] as string);
        resolve({ status: res.statusCode ?? 0, headers: out, text: Buffer.concat(chunks).toString('utf8') });
      });
    });
    req.end(body);
  });
}

export interface BrowserClientOptions {
  userAgent?: string;
  timeoutMs?: number;
  /** Trust anchor (PEM) for https URLs; without it https goes through fetch and the system store. */
  ca?: string;
  /** Local address for https connections (a loopback alias), so a proxy's X-Forwarded-For names this client. */
  localAddress?: string;
  /** Keep the Secure and `__Host-`/`__Secure-` rules (see the file comment). */
  honourSecure?: boolean;
}

export class BrowserClient {
  readonly #jar = new Map<string, StoredCookie[]>();
  readonly #userAgent: string;
  readonly #timeoutMs: number;
  readonly #ca: string | undefined;
  readonly #localAddress: string | undefined;
  readonly #honourSecure: boolean;
  /** Set-Cookie headers the jar refused (RFC 6265bis), for assertions. */
  readonly refusedCookies: string[] = [];

  constructor(opts: BrowserClientOptions = {}) {
    this.#userAgent = opts.userAgent ?? 'Mozilla/5.0 (bff-gateway tests) BrowserClient/1';
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
    this.#ca = opts.ca;
    this.#localAddress = opts.localAddress;
    this.#honourSecure = opts.honourSecure ?? false;
  }

  get(url: string | URL, init: BrowserRequestInit = {}): Promise<BrowserResponse> {
    return this.request('GET', url, init);
  }

  post(url: string | URL, init: BrowserRequestInit = {}): Promise<BrowserResponse> {
    return this.request('POST', url, init);
  }

  async request(method: string, url: string | URL, init: BrowserRequestInit = {}): Promise<BrowserResponse> {
    const target = new URL(url);
    const headers = this.#headersFor(method, target, init);
    const body = this.#bodyFor(init, headers);
    const timeoutMs = init.timeoutMs ?? this.#timeoutMs;
    const answer = (target.protocol === 'https:' && this.#ca !== undefined) || headers.has('sec-fetch-mode')
      ? await nodeExchange(target, method, headers, body, { ca: this.#ca, localAddress: this.#localAddress, timeoutMs })
      : await this.#fetch(target, method, headers, body, timeoutMs);
    this.#store(target, answer.headers.getSetCookie());
    return toResponse(target.href, answer.status, answer.headers, answer.text);
  }

  async #fetch(target: URL, method: string, headers: Headers, body: string | Uint8Array | undefined, timeoutMs: number): Promise<RawAnswer> {
    const response = await fetch(target, { method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    return { status: response.status, headers: response.headers, text: await response.text() };
  }

  /** Follows Location headers with GET requests, as a browser does after a form post's 303; bounded. */
  async follow(start: BrowserResponse, opts: FollowOptions = {}): Promise<FollowResult> {
    const maxHops = opts.maxHops ?? 20;
    const hops: Hop[] = [hopOf(start)];
    let current = start;
    while (REDIRECTS.has(current.status) && current.redirectUrl !== undefined) {
      const next = new URL(current.redirectUrl);
      if (opts.stopBefore?.(next)) return { hops, final: current, stoppedAt: next.href };
      if (hops.length > maxHops) throw new Error(`more than ${maxHops} redirects, last at ${current.url}`);
      current = await this.request('GET', next, {
        ...(opts.headers ? { headers: opts.headers } : {}),
        ...(opts.crossSite ? { crossSite: true } : {}),
      });
      hops.push(hopOf(current));
    }
    return { hops, final: current, stoppedAt: undefined };
  }

  /** Name → value of the cookies the jar holds for that URL's origin (any path). */
  cookies(url: string | URL): Record<string, string> {
    const out: Record<string, string> = {};
    for (const cookie of this.#live(originOf(url))) out[cookie.name] = cookie.value;
    return out;
  }

  cookieDetails(url: string | URL): StoredCookie[] {
    return this.#live(originOf(url)).map((c) => ({ ...c }));
  }

  setCookie(url: string | URL, name: string, value: string, attrs: { path?: string; sameSite?: SameSite; maxAgeSeconds?: number } = {}): void {
    const cookie: StoredCookie = {
      name,
      value,
      path: attrs.path ?? '/',
      expiresAt: attrs.maxAgeSeconds === undefined ? undefined : Date.now() + attrs.maxAgeSeconds * 1000,
      sameSite: attrs.sameSite ?? 'lax',
      httpOnly: false,
      secure: false,
      domain: undefined,
    };
    this.#put(originOf(url), cookie);
  }

  deleteCookie(url: string | URL, name: string): void {
    const origin = originOf(url);
    this.#jar.set(origin, (this.#jar.get(origin) ?? []).filter((c) => c.name !== name));
  }

  clearCookies(): void {
    this.#jar.clear();
  }

  #headersFor(method: string, target: URL, init: BrowserRequestInit): Headers {
    const headers = new Headers(init.headers);
    if (!headers.has('user-agent')) headers.set('user-agent', this.#userAgent);
    if (init.crossSite) {
      headers.set('sec-fetch-site', 'cross-site');
      if (!headers.has('sec-fetch-mode')) {
        headers.set('sec-fetch-mode', 'navigate');
        headers.set('sec-fetch-dest', 'document');
      }
    }
    const jarCookies = init.omitCookies ? '' : this.#cookieHeader(method, target, init.crossSite === true);
    const explicit = headers.get('cookie');
    const cookie = [jarCookies, explicit].filter(Boolean).join('; ');
    if (cookie) headers.set('cookie', cookie);
    return headers;
  }

  #bodyFor(init: BrowserRequestInit, headers: Headers): string | Uint8Array | undefined {
    if (init.form !== undefined) {
      if (!headers.has('content-type')) headers.set('content-type', 'application/x-www-form-urlencoded');
      return new URLSearchParams(init.form).toString();
    }
    if (init.json !== undefined) {
      if (!headers.has('content-type')) headers.set('content-type', 'application/json');
      return JSON.stringify(init.json);
    }
    return init.body;
  }

  #cookieHeader(method: string, target: URL, crossSite: boolean): string {
    return this.#live(target.origin)
      .filter((c) => !this.#honourSecure || !c.secure || target.protocol === 'https:')
      .filter((c) => pathMatches(target.pathname, c.path))
      .filter((c) => !crossSite || c.sameSite === 'none' || (c.sameSite === 'lax' && (method === 'GET' || method === 'HEAD')))
      .sort((a, b) => b.path.length - a.path.length)
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
  }

  #store(target: URL, setCookies: string[]): void {
    const now = Date.now();
    for (const header of setCookies) {
      const parsed = parseSetCookie(header, target, now);
      if (!parsed) continue;
      if (this.#honourSecure && !acceptable(parsed.cookie, target)) {
        this.refusedCookies.push(header);
        continue;
      }
      if (parsed.expired) this.#remove(target.origin, parsed.cookie);
      else this.#put(target.origin, parsed.cookie);
    }
  }

  #put(origin: string, cookie: StoredCookie): void {
    this.#remove(origin, cookie);
    this.#jar.set(origin, [...(this.#jar.get(origin) ?? []), cookie]);
  }

  #remove(origin: string, cookie: StoredCookie): void {
    const list = this.#jar.get(origin) ?? [];
    this.#jar.set(origin, list.filter((c) => !(c.name === cookie.name && c.path === cookie.path)));
  }

  #live(origin: string): StoredCookie[] {
    const now = Date.now();
    const list = (this.#jar.get(origin) ?? []).filter((c) => c.expiresAt === undefined || c.expiresAt > now);
    this.#jar.set(origin, list);
    return list;
  }
}

function hopOf(response: BrowserResponse): Hop {
  return { url: response.url, status: response.status, location: response.headers.get('location') ?? undefined, response };
}
