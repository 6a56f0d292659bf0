/**
 * An upstream's `Location`, judged as the browser will read it (pure). Upstreams sit behind the
 * gateway on hosts the browser never sees (`http://orders:8080`); a redirect that names one
 * tells the browser an internal host and sends it where it cannot go. So a Location is parsed
 * once, with the WHATWG URL parser the browser uses, against the URL the browser asked for (on
 * publicUrl's origin), and:
 *
 * - on the gateway's own origin (a path, `?x`, `#y`, or publicUrl spelled out): passed as sent;
 * - on a configured upstream's host (any scheme or port): made the gateway URL that reaches the
 *   same upstream URL, through the route that serves it (the route's own first, then any other
 *   with that origin), else dropped, never relayed. `//orders:8080/x` and `/\orders:8080/x` are
 *   network-path references the browser resolves to that host, and are judged so;
 * - anywhere else (a third party, a signed storage URL): passed in the form it was judged in.
 *
 * A browser's fetch follows a redirect on its own and keeps the CSRF header on the gateway's
 * origin, so one upstream's redirect was another call of the SPA's (found by the hostile-upstream
 * red team): `307 /auth/logout` signed the user out, `307 /payments/transfer` sent the SPA's
 * body on with the payments route's token. So, on the gateway's origin (as sent, or mapped):
 * - never to the gateway's own endpoints (authPath, the probes), whatever the status;
 * - a redirect the browser repeats with a method other than GET or HEAD (307 and 308; 301 and
 *   302 but for a POST: Fetch §4.4) only within the route that answered it.
 * Any other such Location is dropped.
 *
 * A Location the URL parser refuses is dropped: a browser would not follow it either. Node hands
 * header values over as latin1 (a character per byte) and browsers read a Location's bytes as
 * UTF-8: read as latin1, `https://bücher.example` was another host once re-encoded. So the
 * bytes are read as UTF-8 first, and a Location that is not UTF-8 is dropped too.
 */
import { isUtf8 } from 'node:buffer';
import { canonicalPath } from './canonical-path.js';
import type { CompiledRoute, RouteMatcher } from './routes.js';

/** The header's bytes (a latin1 string, as Node gives them) read as UTF-8; undefined when they are not UTF-8. */
function asSent(latin1: string): string | undefined {
  // eslint-disable-next-line no-control-regex
  if (/^[\x00-\x7f]*$/.test(latin1)) return latin1;
  const bytes = Buffer.from(latin1, 'latin1');
  return isUtf8(bytes) ? bytes.toString('utf8') : undefined;
}

/**
 * The Location to answer with, or undefined: none (the answer goes without one). `status` is the
 * answer's, `method` the request's: together they say how a browser follows it. `target` is the
 * canonical gateway request target the browser asked for: what a relative Location is resolved
 * against, as the browser resolves it (`../auth/events` from `/bff/api/items` is `/bff/auth/events`).
 */
export type Relocate = (location: string, status: number, method: string, target: string) => string | undefined;

/** Whether a browser's fetch follows `status` by sending `method` again, one that is not GET or HEAD (Fetch §4.4). */
export function repeatsUnsafe(status: number, method: string): boolean {
  if (method === 'GET' || method === 'HEAD') return false;
  return status === 307 || status === 308 || ((status === 301 || status === 302) && method !== 'POST');
}

/** Why a Location was dropped, as the log says it. */
export const DROPPED_BECAUSE = {
  unserved_upstream: "an upstream's redirect named an upstream host no route serves",
  gateway_endpoint: "an upstream's redirect named one of the gateway's own endpoints, which the browser would call with the SPA's CSRF header",
  other_route: "an upstream's redirect would have the browser repeat a call (not GET or HEAD) on another route, with that route's token",
} as const;

export type DroppedBecause = keyof typeof DROPPED_BECAUSE;

interface Reverse {
  route: CompiledRoute;
  /** The target's own path without its trailing slash ('' for `/`). */
  base: string;
}

export interface RelocationInput {
  routes: readonly CompiledRoute[];
  match: RouteMatcher;
  publicUrl: URL;
  /** Whether a canonical path is one of the gateway's own endpoints (authPath, the probes). */
  isGatewayPath(path: string): boolean;
  /** A Location dropped, and why (logged by the caller: the route only, never the URL). */
  onDropped(route: CompiledRoute, because: DroppedBecause): void;
}

/** Each route's Relocate, sharing one table of the upstreams' hosts and origins. */
export function createRelocation(input: RelocationInput): (route: CompiledRoute) => Relocate {
  const { match, publicUrl, onDropped, isGatewayPath } = input;
  const publicOrigin = publicUrl.origin;
  const internalHosts = new Set<string>();
  const reverses: Reverse[] = [];
  for (const route of input.routes) {
    const target = new URL(route.target);
    internalHosts.add(target.hostname);
    // A target with a query maps nothing back: what the upstream names is not a gateway URL plus that query.
    if (target.search !== '') continue;
    reverses.push({ route, base: target.pathname.endsWith('/') ? target.pathname.slice(0, -1) : target.pathname });
  }

  /** The canonical gateway path at which `reverse`'s route calls the upstream at `path`, if any. */
  function publicPath(reverse: Reverse, pathname: string): string | undefined {
    const path = canonicalPath(pathname);
    if (typeof path !== 'string') return undefined;
    const { base, route } = reverse;
    let forwarded: string;
    if (path === base || path === `${base}/`) forwarded = '/';
    else if (path.startsWith(`${base}/`)) forwarded = path.slice(base.length);
    else return undefined;
    const candidate = !route.stripPrefix ? forwarded : forwarded === '/' ? route.path : `${route.path}${forwarded}`;
    // Only where this route serves it (not some other route, or a path it refuses), and where
    // the route forwards it to exactly that path again.
    return match(candidate) === route && route.upstreamPath(candidate) === forwarded ? candidate : undefined;
  }

  /** Why a browser must not be sent to `pathname` on the gateway's origin from `route`'s answer, if it must not. */
  function refusal(route: CompiledRoute, pathname: string, unsafe: boolean): DroppedBecause | undefined {
    const path = canonicalPath(pathname);
    // A path the gateway refuses is refused again when the browser follows.
    if (typeof path !== 'string') return unsafe ? 'other_route' : undefined;
    if (isGatewayPath(path)) return 'gateway_endpoint';
    return unsafe && match(path) !== route ? 'other_route' : undefined;
  }

  return (route) => {
    // The route's own upstream first, then any other with that origin.
    const own = reverses.filter((r) => r.route === route);
    const candidates = [...own, ...reverses.filter((r) => r.route !== route)];
    const drop = (because: DroppedBecause) => {
      onDropped(route, because);
      return undefined;
    };
    return (location, status, method, target) => {
      const read = asSent(location);
      const url = read === undefined ? null : URL.parse(read, `${publicOrigin}${target}`);
      if (url === null) return undefined;
      const unsafe = repeatsUnsafe(status, method);
      if (url.origin === publicOrigin) {
        const refused = refusal(route, url.pathname, unsafe);
        return refused === undefined ? location : drop(refused);
      }
      if (!internalHosts.has(url.hostname)) return url.href;
      for (const reverse of unsafe ? own : candidates) {
        if (reverse.route.targetOrigin !== url.origin) continue;
        const path = publicPath(reverse, url.pathname);
        if (path !== undefined) return `${publicOrigin}${path}${url.search}${url.hash}`;
      }
      return drop(unsafe && candidates.some((r) => r.route.targetOrigin === url.origin) ? 'other_route' : 'unserved_upstream');
    };
  };
}
