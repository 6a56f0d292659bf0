/**
 * A browser's login-transaction cookies: one per sign-in in flight, named by a short digest of
 * its state, holding the secret that binds the transaction to this browser (the transaction
 * keeps only its digest, `binding`).
 */
import type { Request, Response } from 'express';
import type { Config } from '../config/load.js';
import { digest } from '../redis/keys.js';
import { TRANSACTION_TTL_SECONDS } from '../session/transactions.js';
import { bounceGuardName } from './login-bounce.js';
import { isLoginCookieName, loginCookieClearOptions, loginCookieName, loginCookieOptions, readCookies } from './session-cookie.js';

/**
 * Login cookies are Path=/ (for __Host-), so each one rides along on every request until it
 * expires. Abandoned logins (a tab closed at the provider) must not pile up into a header too
 * large to serve: a browser that already holds this many starts over with a clean slate.
 */
const MAX_LOGIN_COOKIES = 5;

export interface LoginCookies {
  /** Sets the cookie of a new sign-in (after clearing them all if the browser holds too many). */
  start(req: Request, res: Response, state: string, binding: string): void;
  /** The binding secret of `state`'s sign-in, if this browser holds its cookie. */
  read(req: Request, state: string): string | undefined;
  /** Clears `state`'s cookie: a state is good for one callback. */
  clear(res: Response, state: string): void;
  /** The digests of the other sign-ins this browser has in flight (their cookies came along). */
  othersInFlight(req: Request, state: string): string[];
}

export function createLoginCookies(config: Config): LoginCookies {
  // The bounce's guard is no sign-in in progress: it does not count, nor is it cleared here.
  const bounceGuard = bounceGuardName(config);
  const clearOptions = loginCookieClearOptions(config);
  const nameOf = (state: string) => loginCookieName(config, digest(state).slice(0, 12));
  const signInCookies = (req: Request) =>
    Object.entries(readCookies(req)).filter(([name, value]) => value && name !== bounceGuard && isLoginCookieName(config, name)) as Array<[string, string]>;

  return {
    start(req, res, state, binding) {
      const names = signInCookies(req).map(([name]) => name);
      if (names.length >= MAX_LOGIN_COOKIES) for (const name of names) res.clearCookie(name, clearOptions);
      res.cookie(nameOf(state), binding, loginCookieOptions(config, TRANSACTION_TTL_SECONDS));
    },
    read(req, state) {
      return readCookies(req)[nameOf(state)];
    },
    clear(res, state) {
      res.clearCookie(nameOf(state), clearOptions);
    },
    othersInFlight(req, state) {
      const own = nameOf(state);
      return signInCookies(req)
        .filter(([name]) => name !== own)
        .slice(0, MAX_LOGIN_COOKIES)
        .map(([, value]) => digest(value));
    },
  };
}
