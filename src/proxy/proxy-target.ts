/**
 * The route's target as the proxy server takes it, computed once. A bracketed IPv6 literal
 * (`http://[::1]:8080`) becomes an object with the bare address, which http-proxy-middleware's
 * per-call middleware used to do (httpxy would look `[::1]` up in DNS and fail); `::` stands
 * for loopback, as there. Anything else stays the parsed URL.
 */
export function proxyTarget(target: URL): URL | { protocol: string; hostname: string; port: string; pathname: string; search: string; auth?: string } {
  const { hostname } = target;
  if (!(hostname.startsWith('[') && hostname.endsWith(']'))) return target;
  const bare = hostname.slice(1, -1);
  return {
    protocol: target.protocol,
    hostname: bare === '::' ? '::1' : bare,
    port: target.port,
    pathname: target.pathname,
    search: target.search,
    ...(target.username || target.password ? { auth: `${target.username}:${target.password}` } : {}),
  };
}
