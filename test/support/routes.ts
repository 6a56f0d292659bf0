/**
 * Route matching for tests that are about what a route is, not about refusals: the matcher's
 * refusal (proxy/routes.ts, ROUTE_AMBIGUOUS) fails the test instead of reading as a route.
 */
import type { RouteConfig } from '../../src/config/schema.js';
import { compileRoutes, type CompiledRoute } from '../../src/proxy/routes.js';

export function routeMatcher(routes: readonly RouteConfig[], globalDpop = false): (path: string) => CompiledRoute | undefined {
  const { match } = compileRoutes(routes, globalDpop);
  return (path) => {
    const route = match(path);
    if (route !== undefined && 'refused' in route) throw new Error(`${path} was refused: ${route.refused}`);
    return route;
  };
}
