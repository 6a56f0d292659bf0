/**
 * config.routes compiled once into a longest-prefix matcher (pure). A route's path matches
 * itself and everything below it on a segment boundary: `/api` matches `/api` and `/api/x`,
 * never `/apix`.
 */
import type { RouteConfig } from '../config/schema.js';

export interface CompiledRoute extends RouteConfig {
  /** Path forwarded upstream for a request path (query excluded). */
  upstreamPath(requestPath: string): string;
}

export type RouteMatcher = (pathname: string) => CompiledRoute | undefined;

export function compileRoute(route: RouteConfig): CompiledRoute {
  return {
    ...route,
    upstreamPath(requestPath) {
      if (!route.stripPrefix) return requestPath;
      const rest = requestPath.slice(route.path.length);
      return rest === '' ? '/' : rest;
    },
  };
}

export function compileRoutes(routes: readonly RouteConfig[]): { routes: CompiledRoute[]; match: RouteMatcher } {
  const compiled = routes.map(compileRoute).sort((a, b) => b.path.length - a.path.length);
  return {
    routes: compiled,
    match: (pathname) =>
      compiled.find((r) => pathname === r.path || (pathname.startsWith(r.path) && pathname[r.path.length] === '/')),
  };
}

/**
 * Paths an upstream might resolve differently from us: dot segments (also percent-encoded),
 * encoded slashes or backslashes. Refused, so a request can never reach a part of an upstream
 * that its route's checks did not cover.
 */
export function isAmbiguousPath(pathname: string): boolean {
  if (pathname.includes('\\') || /%(2f|5c)/i.test(pathname)) return true;
  return pathname.split('/').some((segment) => /^(\.|%2e){1,2}$/i.test(segment));
}
