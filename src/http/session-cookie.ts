/**
 * The session cookie (SPEC §5) through express-session, and the login-transaction cookies.
 */
import type { RequestHandler, Request, CookieOptions } from 'express';
import session from 'express-session';
import { parse as parseCookieHeader, serialize as serializeCookie } from 'cookie';
import { unsign } from 'cookie-signature';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { digest } from '../redis/keys.js';
import { storeUnavailable } from '../redis/errors.js';
import type { SessionRecords } from '../session/records.js';
import type { AuthData } from '../session/data.js';
import type { LoadedSession } from '../proxy/bearer.js';
import type { Config } from '../config/load.js';
import { GatewayError } from '../errors.js';
import type { RedisSessionStore } from '../session/store.js';

export function createSessionMiddleware(config: Config, store: RedisSessionStore): RequestHandler {
  const { derived } = config;
  const express = session({
    name: derived.sessionCookieName,
    secret: [...config.session.secrets],
    store,
    resave: false,
    saveUninitialized: false,
    rolling: false,
    // Not 'destroy': when the store fails, req.session is null at the end of the request, and
    // express-session would then queue a DEL of the session, executed once Redis is back —
    // a Redis blip would sign everyone out. Logout destroys explicitly.
    unset: 'keep',
    cookie: {
      httpOnly: true,
      secure: derived.secureCookies,
      sameSite: config.session.sameSite,
      path: '/',
      maxAge: config.session.absoluteTimeoutSeconds * 1000,
    },
  });
  return function sessionCookie(req, res, next) {
    // express-session sets a Secure cookie only on a request it believes is https. The browser
    // talks to publicUrl (https) even when TLS ends at a load balancer in front of us, so the
    // configured origin decides, not the hop we happen to see.
    if (derived.secureCookies && !req.secure) Object.defineProperty(req, 'secure', { value: true });
    express(req, res, (err?: unknown) => {
      if (err) return next(err);
      // express-session serves the request without req.session when its store is down:
      // that is "unavailable", never "signed out".
      if (!req.session) return next(new GatewayError('session_store_unavailable'));
      next();
    });
  };
}

/** The signed-in session's data, or 401 login_required (no session, or its tokens are gone). */
export function requireSignedIn(req: Request): AuthData {
  const auth = req.session.auth;
  if (!auth || !req.session.tokens?.sealed) throw new GatewayError('login_required');
  return auth;
}

export function sessionCookieOptions(config: Config): CookieOptions {
  return {
    httpOnly: true,
    secure: config.derived.secureCookies,
    sameSite: config.session.sameSite,
    path: '/',
  };
}

/**
 * What a browser is told to forget when a user's session ends here (a logout, another user's
 * sign-in over it): its cached answers and the SPA's storage. Not "cookies": it clears the
 * whole site's cookies (every port of localhost, every subdomain), the provider's session
 * included, breaking its end-session page; ours are set or cleared on the same answer.
 */
export function clearSiteData(res: ServerResponse): void {
  res.setHeader('Clear-Site-Data', '"cache", "storage"');
}

/** Expires the session cookie; works on a bare ServerResponse (the proxy path has no Express). */
export function clearSessionCookie(res: ServerResponse, config: Config): void {
  res.appendHeader(
    'Set-Cookie',
    serializeCookie(config.derived.sessionCookieName, '', {
      httpOnly: true,
      secure: config.derived.secureCookies,
      sameSite: config.session.sameSite,
      path: '/',
      expires: new Date(0),
    }),
  );
}

/** Name of the login cookie of one transaction: one per tab, so parallel logins don't collide. */
export function loginCookieName(config: Config, txId: string): string {
  return `${config.derived.loginCookieName}.${txId}`;
}

/** True for a login-transaction cookie of this gateway (the proxy strips them by the same rule). */
export function isLoginCookieName(config: Config, name: string): boolean {
  return name.startsWith(`${config.derived.loginCookieName}.`);
}

export function loginCookieOptions(config: Config, maxAgeSeconds: number): CookieOptions {
  return {
    httpOnly: true,
    secure: config.derived.secureCookies,
    // The provider's redirect back is a cross-site top-level navigation: Strict would not be sent.
    sameSite: 'lax',
    // Path=/ and no Domain: what the __Host- prefix requires (RFC 6265bis §4.1.3.2). The proxy
    // strips these cookies from forwarded requests like the session cookie.
    path: '/',
    maxAge: maxAgeSeconds * 1000,
  };
}

/** What clears a login cookie: its options without the lifetime (res.clearCookie sets its own). */
export function loginCookieClearOptions(config: Config): Omit<CookieOptions, 'maxAge'> {
  const { maxAge: _ignored, ...clearOptions } = loginCookieOptions(config, 0);
  return clearOptions;
}

/** Cookie header → map; a malformed header yields what parses (never throws). */
export function readCookies(req: Request): Record<string, string | undefined> {
  const header = req.headers.cookie;
  if (!header) return {};
  try {
    return parseCookies(header);
  } catch {
    return {};
  }
}

/**
 * The Cookie header as express-session reads it (its own `cookie` 0.7 strips one pair of
 * double quotes around a value; `cookie` 1.x keeps them): every reader of the gateway's cookies
 * takes `bff="s:…"` as the same session, never one reader signed in and another not.
 */
function parseCookies(header: string): Record<string, string | undefined> {
  const cookies = parseCookieHeader(header, { decode: asSent });
  for (const name in cookies) {
    const value = cookies[name] as string;
    cookies[name] = decodeValue(value.length >= 2 && value.charCodeAt(0) === 0x22 && value.charCodeAt(value.length - 1) === 0x22 ? value.slice(1, -1) : value);
  }
  return cookies;
}

const asSent = (value: string) => value;
/** Percent-decoding as both `cookie` versions do it, after the quotes come off (as 0.7 orders it). */
function decodeValue(value: string): string {
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/** Our signed session cookies are about 80 characters; anything much longer is not one. */
const MAX_SIGNED_VALUE = 256;
/** Cookie headers up to this length are memoised by createCookieVerifier (10,000 x 1 KB at most). */
const MAX_MEMO_HEADER = 1024;

function signedValue(header: string | undefined, name: string): string | undefined {
  if (!header || !header.includes(name)) return undefined;
  let raw: string | undefined;
  try {
    raw = parseCookies(header)[name];
  } catch {
    return undefined;
  }
  return raw?.startsWith('s:') && raw.length <= MAX_SIGNED_VALUE ? raw.slice(2) : undefined;
}

function verifySigned(value: string, secrets: readonly string[]): string | undefined {
  for (const secret of secrets) {
    const id = unsign(value, secret);
    if (id !== false) return id;
  }
  return undefined;
}

/** The session ID from a signed express-session cookie (`s:<id>.<hmac>`), if a secret verifies it. */
export function sessionIdFromCookie(header: string | undefined, name: string, secrets: readonly string[]): string | undefined {
  const value = signedValue(header, name);
  return value === undefined ? undefined : verifySigned(value, secrets);
}

/** A session cookie that verified: the session ID and the digest its Redis keys are named by. */
export interface VerifiedSessionCookie {
  id: string;
  digest: string;
}

/**
 * sessionIdFromCookie with a bounded memo: a browser sends the same cookie on every call, and
 * the HMAC check (and the key digest) are pure functions of the value, so each runs once per
 * value. Only values that verified are remembered, so forged cookies cannot fill the memo.
 */
export function createCookieVerifier(name: string, secrets: readonly string[], size = 10_000) {
  const verified = new Map<string, VerifiedSessionCookie>();
  // The whole Cookie header a browser sends is as constant as the value: the same header string
  // parses to the same value, so a header whose value verified skips the parse too. Headers
  // longer than a few values' worth are not kept (the memo's memory stays bounded).
  const byHeader = new Map<string, VerifiedSessionCookie>();
  const remember = <K,>(map: Map<K, VerifiedSessionCookie>, key: K, entry: VerifiedSessionCookie) => {
    if (map.size >= size) map.delete(map.keys().next().value as K);
    map.set(key, entry);
  };
  return (header: string | undefined): VerifiedSessionCookie | undefined => {
    if (header === undefined) return undefined;
    const seen = byHeader.get(header);
    if (seen !== undefined) return seen;
    const value = signedValue(header, name);
    if (value === undefined) return undefined;
    let entry = verified.get(value);
    if (entry === undefined) {
      const id = verifySigned(value, secrets);
      if (id === undefined) return undefined;
      entry = { id, digest: digest(id) };
      remember(verified, value, entry);
    }
    if (header.length <= MAX_MEMO_HEADER) remember(byHeader, header, entry);
    return entry;
  };
}

/**
 * Reads the session of a proxied call or WebSocket upgrade: verify the cookie, one GETEX.
 * express-session's per-request machinery (Session objects, change hashing, response hooks) is
 * not needed on a path that never writes the session, and it costs more than the proxying.
 */
export type SessionReader = (req: IncomingMessage) => Promise<LoadedSession | undefined>;

export function createSessionReader(config: Config, records: SessionRecords): SessionReader {
  const verify = createCookieVerifier(config.derived.sessionCookieName, config.session.secrets);
  return async function readSession(req: IncomingMessage): Promise<LoadedSession | undefined> {
    const cookie = verify(req.headers.cookie);
    if (!cookie) return undefined;
    let view;
    try {
      view = await records.view(cookie.digest);
    } catch (err) {
      // withStore (redis/errors.ts) without its closure per call: a Redis failure is a 503.
      throw storeUnavailable(err);
    }
    return { digest: cookie.digest, auth: view?.auth, tokens: view?.tokens, gone: view === undefined };
  };
}

/** express-session's callbacks as promises: a new session id, a save, a destroy. */
export function regenerate(req: Request): Promise<void> {
  return new Promise((resolve, reject) => req.session.regenerate((err: unknown) => (err ? reject(err) : resolve())));
}

export function save(req: Request): Promise<void> {
  return new Promise((resolve, reject) => req.session.save((err: unknown) => (err ? reject(err) : resolve())));
}

export function destroy(req: Request): Promise<void> {
  return new Promise((resolve, reject) => req.session.destroy((err: unknown) => (err ? reject(err) : resolve())));
}
