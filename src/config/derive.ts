import { riskySettings } from './safety.js';
import type { ParsedConfig } from './schema.js';

/** Values computed once from the validated config, so no request recomputes them. */
export interface DerivedConfig {
  /** Exact redirect_uri registered at the provider: publicUrl + authPath + /callback. */
  redirectUri: string;
  /** publicUrl's origin, e.g. https://app.example.com (the WebSocket Origin check uses it). */
  publicOrigin: string;
  /** Cookies get Secure and the __Host- / __Secure- prefixes when publicUrl is https. */
  secureCookies: boolean;
  sessionCookieName: string;
  /**
   * Prefix of the short-lived login-transaction cookies (`<name>.<transaction id>`). __Host- on
   * https like every cookie the gateway sets (Secure, Path=/, no Domain), so a sibling
   * subdomain can neither plant nor overwrite one (login CSRF).
   */
  loginCookieName: string;
  callbackPath: string;
  postLogoutRedirectUri: string;
  /**
   * Sessions get a DPoP key (RFC 9449): `oidc.dpop` or any route's `dpop`. A sign-in yields one
   * access token for every user route, so binding is decided per deployment, not per route.
   */
  dpop: boolean;
  /** Settings that may be deliberate but deserve a look (printed at startup and by --check). */
  warnings: string[];
}

export type Config = ParsedConfig & { derived: DerivedConfig };

export function derive(cfg: ParsedConfig): Config {
  const publicUrl = new URL(cfg.server.publicUrl);
  const secure = publicUrl.protocol === 'https:';
  const callbackPath = `${cfg.server.authPath}/callback`;
  return {
    ...cfg,
    derived: {
      redirectUri: `${publicUrl.origin}${callbackPath}`,
      publicOrigin: publicUrl.origin,
      secureCookies: secure,
      sessionCookieName: secure ? `__Host-${cfg.session.cookieName}` : cfg.session.cookieName,
      loginCookieName: secure ? `__Host-${cfg.session.cookieName}-login` : `${cfg.session.cookieName}-login`,
      callbackPath,
      postLogoutRedirectUri: `${publicUrl.origin}${cfg.oidc.postLogoutRedirectPath}`,
      dpop: cfg.oidc.dpop || cfg.routes.some((r) => r.dpop),
      warnings: riskySettings(cfg),
    },
  };
}

export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
