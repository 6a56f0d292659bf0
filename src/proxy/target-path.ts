/**
 * How a route target's own path and the forwarded request target (path and query) make the
 * path the upstream is called at: httpxy's joinURL rule, kept here once so that WebSocket
 * handshakes (websocket-tunnel.ts) and DPoP proofs' `htu` (dpop-proofs.ts) name exactly the URL
 * that HTTP calls go to. Note `/base` and `/` make `/base` (no slash added). Pure.
 */
export function joinTargetPath(base: string, forwarded: string): string {
  if (!base || base === '/') return forwarded || '/';
  if (!forwarded || forwarded === '/') return base;
  const baseSlash = base.endsWith('/');
  const pathSlash = forwarded.startsWith('/');
  if (baseSlash && pathSlash) return base + forwarded.slice(1);
  if (!baseSlash && !pathSlash) return `${base}/${forwarded}`;
  return base + forwarded;
}
