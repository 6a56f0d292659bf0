/** The fields of a target that httpxy reads on every call (setupOutgoing). */
export interface PlainTarget {
  protocol: string;
  host?: string;
  hostname: string;
  port: string;
  pathname: string;
  search: string;
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
  const { hostname } = target;
  if (!(hostname.startsWith('[') && hostname.endsWith(']'))) {
    if (target.search) return target;
    return Object.freeze({ protocol: target.protocol, host: target.host, hostname, port: target.port, pathname: target.pathname, search: '' });
  }
  // Never the URL here, even with a query (which httpxy then leaves out, as it always did for
  // these targets): given `[::1]`, httpxy would look it up in DNS.
  const bare = hostname.slice(1, -1);
  return Object.freeze({
    protocol: target.protocol,
    hostname: bare === '::' ? '::1' : bare,
    port: target.port,
    pathname: target.pathname,
    search: '',
  });
}
