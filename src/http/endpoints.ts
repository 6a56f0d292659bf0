/**
 * The gateway's own endpoints as fixed names, for span names (request-tracing.ts) and metric
 * labels (metrics-route.ts) alike: one list, so a trace and a metric name the same endpoint the
 * same way. Never the request's own path: no id, token or query can reach a name. The same list
 * says which methods each answers (a 405's `Allow`, app.ts) and which paths are the gateway's
 * own (an upstream's redirect never names one: proxy/location.ts).
 */

/**
 * Endpoints under authPath (SPEC §3), as templates, with the methods each answers: the `Allow`
 * of a 405 to any other (a GET endpoint answers HEAD too, as Express serves it).
 */
const AUTH_ENDPOINTS: ReadonlyMap<string, string> = new Map([
  ['/login', 'GET, HEAD'],
  ['/callback', 'GET, HEAD'],
  ['/user', 'GET, HEAD'],
  ['/logout', 'POST'],
  ['/backchannel-logout', 'POST'],
  ['/sessions', 'GET, HEAD'],
  ['/sessions/:id', 'DELETE'],
  ['/events', 'GET, HEAD'],
]);
/** The probes: named as themselves. */
export const PROBES: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * The endpoint a (canonical) request path is for: a probe (`/healthz`), `/auth/login`,
 * `/auth/sessions/:id`; `<authPath>/*` for unknown paths under authPath, `/*` for the rest (the
 * SPA, 404s). Matched as Express routes them: case-insensitive, one trailing slash allowed.
 */
export function endpointOf(path: string, authPath: string): string {
  const lower = (path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path).toLowerCase();
  if (PROBES.has(lower)) return lower;
  const base = authPath.toLowerCase();
  if (lower !== base && !lower.startsWith(`${base}/`)) return '/*';
  const rest = lower.slice(base.length);
  if (AUTH_ENDPOINTS.has(rest)) return `${authPath}${rest}`;
  if (/^\/sessions\/[^/]+$/.test(rest)) return `${authPath}/sessions/:id`;
  return `${authPath}/*`;
}

/**
 * The `Allow` of the gateway endpoint `path` is for (`served`: the probes this listener serves),
 * or undefined for a path that is none of them. Asked only once no route took the request.
 */
export function allowedMethods(path: string, authPath: string, served: ReadonlySet<string>): string | undefined {
  const endpoint = endpointOf(path, authPath);
  if (PROBES.has(endpoint)) return served.has(endpoint) ? 'GET, HEAD' : undefined;
  return endpoint.startsWith(authPath) ? AUTH_ENDPOINTS.get(endpoint.slice(authPath.length)) : undefined;
}
