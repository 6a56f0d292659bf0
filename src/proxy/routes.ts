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
 */
import type { RouteConfig } from '../config/schema.js';
import { decodePath } from './canonical-path.js';

export interface CompiledRoute extends RouteConfig {
  /** The target's origin (scheme, host, port), parsed once: e.g. whose DPoP nonce applies. */
  targetOrigin: string;
  /** Path forwarded upstream for a canonical request path under this route (query excluded). */
  upstreamPath(requestPath: string): string;
}

export type RouteMatcher = (canonicalPath: string) => CompiledRoute | undefined;

function segmentCount(path: string): number {
  let count = 0;
  for (let i = 0; i < path.length; i++) if (path.charCodeAt(i) === 0x2f) count++;
  return count;
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

export function compileRoutes(routes: readonly RouteConfig[], globalDpop = false): { routes: CompiledRoute[]; match: RouteMatcher } {
  const compiled = routes
    .map((route) => ({ route: compileRoute(route, globalDpop), decoded: decodePath(route.path) }))
    .sort((a, b) => b.decoded.length - a.decoded.length);
  return {
    routes: compiled.map((c) => c.route),
    match(canonicalPath) {
      const path = decodePath(canonicalPath);
      for (const { route, decoded } of compiled) {
        if (path.startsWith(decoded) && (path.length === decoded.length || path.charCodeAt(decoded.length) === 0x2f)) return route;
      }
      return undefined;
    },
  };
}
