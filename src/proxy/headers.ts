/**
 * Request and response header rules for proxied calls (pure). SPEC §4; RFC 9700 §4.13: a
 * reverse proxy sanitizes inbound security-relevant headers before setting its own.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { normaliseAddress } from '../config/cidr.js';
import type { Relocate } from './location.js';
import type { TrustHop } from './trust.js';

const FORWARDING = ['forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-forwarded-port', 'x-forwarded-prefix', 'x-real-ip'];
/**
 * What the gateway writes itself on every upstream request, whatever the browser sent: its
 * forwarding headers (forwardingHeaders) and the credential (Authorization, and DPoP's proof).
 */
const SET_BY_GATEWAY: ReadonlySet<string> = new Set([...FORWARDING, 'authorization', 'dpop']);
export const isSetByGateway = (lowerName: string): boolean => SET_BY_GATEWAY.has(lowerName);
const CONNECTION_TOKENS_KEPT = new Set(['keep-alive', 'close', 'upgrade']);

/**
 * Hop-by-hop request headers (RFC 9110 §7.6.1): they describe the browser's connection to the
 * gateway, not the gateway's pooled connection to the upstream. `Proxy-*` goes too (by prefix).
 * `Connection` itself is replaced by the gateway's own (see compileRequestHeaderStrip); `Upgrade`
 * is set again by the gateway itself on a real WebSocket handshake.
 */
export const HOP_BY_HOP_REQUEST_HEADERS: readonly string[] = ['keep-alive', 'te', 'trailer', 'upgrade'];

/**
 * The request announces a body still to come: chunked, or a Content-Length other than 0 (what
 * a retry may not resend, a refused call may not drain, a WebSocket handshake may not carry).
 */
export function announcesBody(headers: IncomingHttpHeaders): boolean {
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = headers['content-length'];
  return length !== undefined && length !== '0';
}

/**
 * Headers a browser must not be able to set for the upstream: URL rewrites some frameworks and
 * proxies honour (IIS/Symfony X-Original-URL, X-Rewrite-URL, Traefik X-Forwarded-Uri, nginx
 * auth_request X-Original-URI, Envoy X-Envoy-Original-Path...), the scheme, host and server
 * other proxies report (X-Forwarded-Scheme, -Ssl, -Server, X-Original-Host, X-Host: the gateway
 * sets X-Forwarded-Proto and -Host itself), client addresses that CDNs and load balancers set
 * and upstreams trust (the gateway's own is in X-Forwarded-For), and method overrides (a GET
 * that the upstream runs as DELETE, past the gateway's method checks).
 */
export const IDENTITY_REQUEST_HEADERS: readonly string[] = [
  'x-original-url',
  'x-rewrite-url',
  'x-forwarded-uri',
  'x-original-uri',
  'x-forwarded-path',
  'x-envoy-original-path',
  'x-forwarded-scheme',
  'x-forwarded-ssl',
  'x-forwarded-server',
  'x-original-host',
  'x-host',
  'true-client-ip',
  'x-client-ip',
  'cf-connecting-ip',
  'x-cluster-client-ip',
  'fastly-client-ip',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
];

/**
 * Expectations the gateway has already met (RFC 9110 §10.1.1): Node answered `100 Continue` to
 * the browser before the request reached the gateway, so `Expect` means nothing to the upstream
 * hop. Forwarded, it also makes httpxy skip its proxyReq event, where upstream.ts notes a pooled
 * connection and watches for a 101 (the route's deadline is armed before, as the agent is given
 * the request).
 */
const MET_BY_GATEWAY: readonly string[] = ['expect'];

/**
 * Never removed because `Connection` names them: they frame the message or name its target,
 * and the gateway, not the browser, decides those for the upstream hop (RFC 9110 §7.6.1 forbids
 * naming them anyway). Dropping Transfer-Encoding of a chunked body would desynchronise the
 * upstream connection.
 */
const FRAMING = new Set(['content-length', 'transfer-encoding', 'host']);

/**
 * A lower-case header name as a CGI-style upstream reads it (RFC 3875 §4.1.18: WSGI, Rack, PHP
 * map `-` and `_` alike): `x_forwarded_for` is x-forwarded-for there. Every header rule is
 * compiled in this form and every incoming name judged in it, so no spelling slips past a rule.
 */
export const headerKey = (lower: string): string => (lower.indexOf('_') === -1 ? lower : lower.replace(/_/g, '-'));

/** "proxy-..." (Proxy-Authorization, Proxy-Connection, Proxy-Authenticate): for a proxy, not for us to pass on. */
const isProxyHeader = (lower: string): boolean => lower.charCodeAt(0) === 112 /* p */ && lower.startsWith('proxy-');

/**
 * Compiles the request header strip list once (built-in lists plus server.stripRequestHeaders):
 * the returned function copies a browser request's headers into a fresh object without every
 * header that must not reach the upstream. One pass over the header names; the Connection
 * header is parsed only when it names more than keep-alive or close.
 *
 * The browser's Connection becomes the gateway's own, `keep-alive`: the upstream hop is a pooled
 * keep-alive connection, and that is what the agent would send anyway. (A browser's `close`
 * forwarded as is made the upstream close a socket the agent kept in its pool.)
 *
 * A copy, not deletes on the request's own object: one `delete` turns a header object into a
 * slow dictionary for the rest of its way (httpxy spreads it into the outgoing request, and
 * Node writes it out), which cost more per call than building the copy. `skip` names further
 * headers the caller sets itself (it is asked only for names the lists keep, in headerKey form).
 */
export function compileRequestHeaderStrip(
  extra: readonly string[] = [],
): (headers: IncomingHttpHeaders, skip?: (name: string) => boolean) => IncomingHttpHeaders {
  const strip = new Set([...HOP_BY_HOP_REQUEST_HEADERS, ...MET_BY_GATEWAY, ...IDENTITY_REQUEST_HEADERS, ...extra.map((h) => headerKey(h.toLowerCase()))]);
  strip.delete('connection');
  return (headers, skip) => {
    const connection = headers.connection;
    const nominated = connection !== undefined && connection !== 'keep-alive' && connection !== 'close' ? connectionNominated(headers).map(headerKey) : undefined;
    const out: IncomingHttpHeaders = {};
    for (const name in headers) {
      if (name === 'connection') {
        out.connection = 'keep-alive';
        continue;
      }
      // `X_Forwarded_For` came before the gateway's own X-Forwarded-For at a CGI-style upstream.
      // Underscore spellings of framing headers are the gateway's to decide too: never forwarded.
      const judged = headerKey(name);
      if (judged !== name && FRAMING.has(judged)) continue;
      if (strip.has(judged) || isProxyHeader(judged)) continue;
      if (nominated !== undefined && nominated.includes(judged) && !FRAMING.has(judged)) continue;
      if (skip !== undefined && skip(judged)) continue;
      out[name] = headers[name];
    }
    return out;
  };
}

/**
 * Response headers never relayed: hop-by-hop ones (RFC 9110 §7.6.1; the gateway frames its own
 * answer to the browser), and those that speak for the whole origin or the proxy in front of
 * the gateway rather than for one answer, the gateway's business, not an upstream's:
 * `Clear-Site-Data` (it cleared the session cookie without ending the session),
 * `Strict-Transport-Security` (`max-age=0` undid the origin's HSTS), `NEL` and `Report-To`
 * (a policy for the whole origin: the browser would report every request URL, sign-in callbacks
 * with their codes included, to where the upstream says), `Reporting-Endpoints`, `Alt-Svc`,
 * `Service-Worker-Allowed` (a worker scoped over `/auth`), and the internal-redirect headers
 * nginx, Apache, lighttpd and LiteSpeed act on (`X-Accel-Redirect: /internal/...`).
 */
const DROPPED_RESPONSE = new Set([
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'upgrade',
  'transfer-encoding',
  'clear-site-data',
  'strict-transport-security',
  'nel',
  'report-to',
  'reporting-endpoints',
  'alt-svc',
  'service-worker-allowed',
  'x-accel-redirect',
  'x-sendfile',
  'x-lighttpd-send-file',
  'x-litespeed-location',
]);

/**
 * An upstream response's raw header list (name, value, name, value...) without its hop-by-hop
 * headers (those above, Proxy-*, and the ones its Connection names), the origin-wide ones above,
 * and Set-Cookie values that would overwrite the gateway's own cookies; a Location goes as
 * `relocate` (location.ts) has it, for an answer of `status` to a request of `method` for `target`. Order and case are kept. The gateway's
 * HTTP server then frames the answer itself (Content-Length kept, else chunked or close).
 */
export function responseHeaders(raw: readonly string[], isOurs: (name: string) => boolean, relocate?: Relocate, status = 0, method = 'GET', target = '/'): string[] {
  const out: string[] = [];
  let connection: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    const lower = name.toLowerCase();
    if (lower === 'connection') connection = connection === undefined ? value : `${connection}, ${value}`;
    if (DROPPED_RESPONSE.has(lower) || isProxyHeader(lower)) continue;
    if (lower === 'set-cookie' && isOursOrNameless(cookieName(value), isOurs)) continue;
    if (lower === 'location' && relocate !== undefined) {
      const moved = relocate(value, status, method, target);
      if (moved !== undefined) out.push(name, moved);
      continue;
    }
    out.push(name, value);
  }
  if (connection === undefined || connection === 'keep-alive' || connection === 'close') return out;
  const named = new Set(connectionNominated({ connection }));
  if (named.size === 0) return out;
  const kept: string[] = [];
  for (let i = 0; i < out.length; i += 2) {
    if (!named.has((out[i] as string).toLowerCase())) kept.push(out[i] as string, out[i + 1] as string);
  }
  return kept;
}

/**
 * A nameless cookie (`=bff=x`) is dropped too: a browser that stores it sends `bff=x` back, the
 * gateway's cookie by another name (RFC 6265bis leaves the name empty; Chromium refuses such a
 * cookie, older Firefox and Safari kept it).
 */
const isOursOrNameless = (name: string, isOurs: (name: string) => boolean) => name === '' || isOurs(name);

function cookieName(pair: string): string {
  const eq = pair.indexOf('=');
  return (eq === -1 ? pair : pair.slice(0, eq)).trim();
}

/**
 * Removes the cookies for which `isOurs(name)` holds; undefined when none remain. One pass over
 * the header (it is on every proxied call): no arrays, and nothing built for the cookies dropped.
 */
export function stripCookies(header: string | undefined, isOurs: (name: string) => boolean): string | undefined {
  if (!header) return undefined;
  let kept: string | undefined;
  let start = 0;
  while (start <= header.length) {
    let end = header.indexOf(';', start);
    if (end === -1) end = header.length;
    const pair = header.slice(start, end).trim();
    if (pair.length > 0 && !isOurs(cookieName(pair))) kept = kept === undefined ? pair : `${kept}; ${pair}`;
    start = end + 1;
  }
  return kept;
}

export interface ForwardingInput {
  headers: IncomingHttpHeaders;
  remoteAddress: string | undefined;
  /** server.trustProxy, compiled: is the socket peer a proxy of ours? */
  trust: TrustHop;
  /** The origin the browser talks to (publicUrl). */
  publicProtocol: string;
  publicHost: string;
}

/**
 * Headers to set (value) or remove (undefined) on the upstream request. The forwarding headers
 * are the gateway's own: X-Forwarded-Proto and -Host name publicUrl (the one origin the browser
 * talks to), and Forwarded, X-Forwarded-Port, -Prefix and X-Real-IP are dropped, whoever the
 * peer is. A load balancer passes on what the browser wrote in the headers it does not set
 * itself, so the gateway cannot tell its values from the browser's. Forwarded is dropped, not
 * rebuilt: X-Forwarded-For carries the same chain.
 *
 * Only X-Forwarded-For of a trusted peer (server.trustProxy) is kept, and extended with the
 * peer: the client address is read from it right to left (trust.ts), so entries a browser
 * wrote further left are never taken for a hop.
 */
export function forwardingHeaders(input: ForwardingInput): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const name of FORWARDING) if (input.headers[name] !== undefined) out[name] = undefined;
  const remote = input.remoteAddress ?? '';
  // A dual-stack socket reports an IPv4 peer as `::ffff:a.b.c.d`: the chain names it as IPv4.
  const peer = remote.charCodeAt(0) === 58 /* : */ ? normaliseAddress(remote) : remote;
  const prior = input.trust(peer, 0) ? input.headers['x-forwarded-for'] : undefined;
  const chain = Array.isArray(prior) ? prior.join(', ') : prior;
  out['x-forwarded-for'] = chain ? `${chain}, ${peer}` : peer;
  out['x-forwarded-proto'] = input.publicProtocol;
  out['x-forwarded-host'] = input.publicHost;
  return out;
}

/** Headers the client named in `Connection` are hop-by-hop (RFC 9110 §7.6.1): not forwarded. */
export function connectionNominated(headers: IncomingHttpHeaders): string[] {
  const value = headers.connection;
  if (!value) return [];
  return value
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t.length > 0 && !CONNECTION_TOKENS_KEPT.has(t));
}
