/** The fields of a target that httpxy reads on every call (setupOutgoing). */
export interface PlainTarget {
  protocol: string;
  host?: string;
  hostname: string;
  port: string;
  pathname: string;
  search: string;
  auth?: string;
}

/**
 * The route's target as the proxy server takes it, computed once.
 *
 * A plain object of strings rather than the URL: httpxy reads the target's protocol, host,
 * hostname, port, pathname and search on every call, and each URL getter makes a new string
 * (about a dozen per call). The fields are the URL's own, so the Host header and the path are
 * what the URL gave. A target with a query stays the URL: httpxy appends a target's query only
 * for a URL.
 *
 * A bracketed IPv6 literal (`http://[::1]:8080`) becomes the bare address, which
 * http-proxy-middleware's per-call middleware used to do (httpxy would look `[::1]` up in DNS
 * and fail); `::` stands for loopback, as there.
 */
export function proxyTarget(target: URL): URL | Readonly<PlainTarget> {
  if (target.search) return target;
  const { hostname } = target;
  if (!(hostname.startsWith('[') && hostname.endsWith(']'))) {
    return Object.freeze({ protocol: target.protocol, host: target.host, hostname, port: target.port, pathname: target.pathname, search: '' });
  }
  const bare = hostname.slice(1, -1);
  return Object.freeze({
    protocol: target.protocol,
    hostname: bare === '::' ? '::1' : bare,
    port: target.port,
    pathname: target.pathname,
    search: target.search,
    ...(target.username || target.password ? { auth: `${target.username}:${target.password}` } : {}),
  });
}
