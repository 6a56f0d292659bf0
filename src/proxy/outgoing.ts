/**
 * What one attempt sends upstream, besides its body: the request target (the route's path rule,
 * the query as the browser sent it) and the headers, rebuilt from the browser's by the rules of
 * headers.ts, with the credential and, on DPoP routes, a fresh proof.
 */
import type http from 'node:http';
import type { CompiledRoute } from './routes.js';
import { compileRequestHeaderStrip, forwardingHeaders, headerKey, isSetByGateway, stripCookies } from './headers.js';
import type { TrustHop } from './trust.js';
import { proofTarget, type DpopAttachment } from './dpop-proofs.js';
import { DPOP, isBodyless, type Retriable } from './upstream-call.js';
import type { Credential } from './upstream.js';

export interface OutgoingOptions {
  route: CompiledRoute;
  /** The route's target, parsed. */
  target: URL;
  trust: TrustHop;
  stripRequestHeaders?: readonly string[];
  publicUrl: URL;
  isGatewayCookie: (name: string) => boolean;
}

export interface Outgoing {
  /** The upstream request target for a canonical one. */
  upstreamTarget(url: string): string;
  /** Puts the attempt's headers in req.headers (httpxy sends what is there). */
  prepare(req: http.IncomingMessage, credential: Credential | undefined): void;
  /** A fresh DPoP proof for the attempt (a resend's too: the upstream may have spent the last one). */
  addProof(req: http.IncomingMessage, attachment: DpopAttachment): void;
}

export function createOutgoing(options: OutgoingOptions): Outgoing {
  const { route, target, isGatewayCookie } = options;
  const publicProtocol = options.publicUrl.protocol.slice(0, -1);
  const publicHost = options.publicUrl.host;
  const stripRequestHeaders = compileRequestHeaderStrip(options.stripRequestHeaders);

  /** The upstream request target for a canonical one: the route's path rule, the query as sent. */
  function upstreamTarget(url: string): string {
    const q = url.indexOf('?');
    if (q === -1) return route.upstreamPath(url);
    return route.upstreamPath(url.slice(0, q)) + url.slice(q);
  }

  /**
   * The upstream request's headers, built once per attempt as a fresh object and put in
   * req.headers: httpxy copies req.headers into the outgoing request, so what is there is what
   * is sent. The browser's own Authorization, DPoP and forwarding headers never go through
   * (the gateway sets its own), nor the gateway's cookies.
   */
  function prepareHeaders(req: http.IncomingMessage, credential: Credential | undefined): void {
    const source = req.headers;
    const forwarded = forwardingHeaders({
      headers: source,
      remoteAddress: req.socket.remoteAddress,
      trust: options.trust,
      publicProtocol,
      publicHost,
    });
    // Hop-by-hop and identity headers go first: a browser's `Connection: close` must not reach an
    // upstream connection that the gateway's agent keeps in its pool.
    // The skip is asked only about names the strip rules keep: a Cookie they drop
    // (server.stripRequestHeaders, or one the browser's Connection names) stays dropped.
    let cookieKept = false;
    const credentialKey = credential === undefined ? undefined : headerKey(credential.header);
    const headers = stripRequestHeaders(source, (name) => {
      if (name === 'cookie') return (cookieKept = true);
      // A set, not `in forwarded`: a header named like an Object.prototype member
      // (`Constructor`) would have been taken for one of the gateway's and dropped. The
      // credential's own header (an API key's) is the gateway's too, in any spelling.
      return isSetByGateway(name) || name === credentialKey;
    });
    if (cookieKept) {
      const cookie = stripCookies(source.cookie, isGatewayCookie);
      if (cookie !== undefined) headers.cookie = cookie;
    }
    for (const name in forwarded) {
      const value = forwarded[name];
      if (value !== undefined) headers[name] = value;
    }
    if (credential) headers[credential.header] = credential.value;
    req.headers = headers;
    if (credential?.dpop) addProof(req, credential.dpop);
  }

  /**
   * The target URI is computed on the first attempt, from the canonical path: upstream.ts's
   * forward() rewrites req.url to the upstream path before sending, and a retry must not
   * rewrite it twice.
   */
  function addProof(req: http.IncomingMessage, attachment: DpopAttachment): void {
    let htu = (req as Retriable)[DPOP]?.htu;
    if (htu === undefined) htu = proofTarget(target, upstreamTarget(req.url ?? '/'));
    req.headers.dpop = attachment.proof(req.method ?? 'GET', htu);
    (req as Retriable)[DPOP] = { attachment, bodyless: isBodyless(req), htu };
  }

  return { upstreamTarget, prepare: prepareHeaders, addProof };
}
