/**
 * config.routes compiled once into a longest-prefix matcher (pure). A route's path matches
 * itself and everything below it on a segment boundary: `/api` matches `/api` and `/api/x`,
 * never `/apix`.
 *
 * Requests arrive canonical (canonical-path.ts). They are matched with every remaining escape
 * decoded, as a decoding upstream reads them: a route `/api/a!b` and a request `/api/a%21b`
 * are the same place. Config route paths are canonical too (the schema says so) and compared
 * in the same decoded form. Decoding never produces a "/", so segment boundaries are the same
 * in both forms.
 *
 * Matching is exact, but many upstreams read a path more loosely: without regard to case
 * (Express, ASP.NET, IIS, koa-router, Java's equalsIgnoreCase), without a segment's trailing
 * dots and spaces (Windows, IIS), and without a format suffix on a route's last segment (Rails,
 * older Spring MVC). With routes `/api` and `/api/admin` (scopes, step-up), `/api/ADMIN/users` or
 * `/api/admin./users` matches `/api` here and reaches the admin handler there, past the admin
 * route's checks. A path whose loose reading names a more specific route than its match is
 * refused (`route_ambiguous`), the way canonical-path.ts refuses what neighbours read
 * differently; one whose loose reading lands on the same route (`/api/dns/example.com.`,
 * `/api/search/foo%20`) is served as sent. Only routes with a route below them, in some
 * reading, pay for the check.
 */
import type { RouteConfig } from '../config/schema.js';
import { decodePath, looseReading, under, type PathRefusal } from './canonical-path.js';

export interface CompiledRoute extends RouteConfig {
  /** The target's origin (scheme, host, port), parsed once: e.g. whose DPoP nonce applies. */
  targetOrigin: string;
  /** Path forwarded upstream for a canonical request path under this route (query excluded). */
  upstreamPath(requestPath: string): string;
}

/** A path that a looser upstream reads as a more specific route than the gateway matched. */
export const ROUTE_AMBIGUOUS: PathRefusal = Object.freeze({ refused: 'route_ambiguous' });

/** The route for a canonical path, a refusal (ROUTE_AMBIGUOUS), or undefined (no route). */
export type RouteMatcher = (canonicalPath: string) => CompiledRoute | PathRefusal | undefined;

function segmentCount(path: string): number {
  let count = 0;
  for (let i = 0; i < path.length; i++) if (path.charCodeAt(i) === 0x2f) count++;
  return count;
}

/**
 * Does this route's auth mode read the user's session? Its answers are then the session's too
 * (a credential only a session gets was sent: cache-headers.ts).
 */
export function needsSession(route: RouteConfig): boolean {
  return route.auth === 'user' || route.auth === 'user-optional' || route.requireSession;
}

/**
 * @param globalDpop `oidc.dpop`: every user route without a token exchange sends DPoP (an
 *   exchanged token is a bearer token for its own audience).
 */
export function compileRoute(route: RouteConfig, globalDpop = false): CompiledRoute {
  const segments = segmentCount(route.path);
  const userRoute = route.auth === 'user' || route.auth === 'user-optional';
  return {
    ...route,
    dpop: route.dpop || (globalDpop && userRoute && route.tokenExchange === undefined),
    targetOrigin: new URL(route.target).origin,
    upstreamPath(requestPath) {
      if (!route.stripPrefix) return requestPath;
      // By segments, not characters: `/api/a%21b` under route `/api/a!b` loses both segments.
      let at = 0;
      for (let k = 0; k < segments; k++) {
        at = requestPath.indexOf('/', at + 1);
        if (at === -1) return '/';
      }
      return requestPath.slice(at);
    },
  };
}

/**
 * No letter A-Z, nothing beyond ASCII, no segment ending in a dot or a space: the path is its
 * own loose reading, and the common call skips looseReading's allocations (a route with routes
 * below it checks every call).
 */
function readsAsItself(decoded: string): boolean {
  const n = decoded.length;
  for (let i = 0; i < n; i++) {
    const c = decoded.charCodeAt(i);
    if (c >= 0x80 || (c >= 0x41 && c <= 0x5a)) return false;
    if ((c === 0x2e || c === 0x20) && (i + 1 === n || decoded.charCodeAt(i + 1) === 0x2f)) return false;
  }
  return true;
}

/**
 * `path` is `prefix` with a format suffix (`/api/admin.json`, `/api/admin.json/` for
 * `/api/admin`): Rails appends `(.:format)` to every route, and Spring MVC before 5.3 matched
 * `.*` suffixes by default, so such an upstream serves it as `prefix`'s.
 */
function withFormat(path: string, prefix: string): boolean {
  return path.charCodeAt(prefix.length) === 0x2e && path.startsWith(prefix) && /^\.[^/]+\/?$/.test(path.slice(prefix.length));
}

interface Entry {
  route: CompiledRoute;
  decoded: string;
  /** Other routes whose loose reading is under this one's: what this route's matches may name. */
  shadows: readonly string[];
}

export function compileRoutes(routes: readonly RouteConfig[], globalDpop = false): { routes: CompiledRoute[]; match: RouteMatcher } {
  const compiled = routes
    .map((route) => ({ route: compileRoute(route, globalDpop), decoded: decodePath(route.path) }))
    .sort((a, b) => b.decoded.length - a.decoded.length);
  const entries: Entry[] = compiled.map(({ route, decoded }) => {
    const loose = looseReading(decoded);
    // Any other route, whatever its length in bytes: `/api/a..` is no shorter than `/api/a/b`,
    // yet a path under it reads as one under `/api/a/b`. (Two routes with one loose reading are
    // refused by the config schema.)
    const shadows = compiled
      .filter((other) => other.route !== route)
      .map((other) => looseReading(other.decoded))
      .filter((other) => other !== loose && under(other, loose));
    return { route, decoded, shadows };
  });
  return {
    routes: compiled.map((c) => c.route),
    match(canonicalPath) {
      const path = decodePath(canonicalPath);
      for (const { route, decoded, shadows } of entries) {
        if (!under(path, decoded)) continue;
        if (shadows.length === 0) return route;
        // No shadow matches this path exactly: it would have matched first, being longer (two
        // routes with one loose reading are refused by the schema).
        const loose = readsAsItself(path) ? path : looseReading(path);
        for (const shadow of shadows) if (under(loose, shadow) || withFormat(loose, shadow)) return ROUTE_AMBIGUOUS;
        return route;
      }
      return undefined;
    },
  };
}
