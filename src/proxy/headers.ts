/**
 * Request and response header rules for proxied calls (pure). SPEC §4; RFC 9700 §4.13: a
 * reverse proxy sanitizes inbound security-relevant headers before setting its own.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { TrustHop } from './trust.js';

const FORWARDING = ['forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-forwarded-port', 'x-forwarded-prefix', 'x-real-ip'];
const CONNECTION_TOKENS_KEPT = new Set(['keep-alive', 'close', 'upgrade']);

function cookieName(pair: string): string {
  const eq = pair.indexOf('=');
  return (eq === -1 ? pair : pair.slice(0, eq)).trim();
}

/** Removes the cookies for which `isOurs(name)` holds; undefined when none remain. */
export function stripCookies(header: string | undefined, isOurs: (name: string) => boolean): string | undefined {
  if (!header) return undefined;
  const kept = header
    .split(';')
    .map((c) => c.trim())
    .filter((c) => c.length > 0 && !isOurs(cookieName(c)));
  return kept.length > 0 ? kept.join('; ') : undefined;
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

/** Headers to set (value) or remove (undefined) on the upstream request. */
export function forwardingHeaders(input: ForwardingInput): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  const peer = input.remoteAddress ?? '';
  // Only a trusted peer's forwarding headers are kept; anyone else's are the browser's own words.
  if (!input.trust(peer, 0)) {
    for (const name of FORWARDING) if (input.headers[name] !== undefined) out[name] = undefined;
    out['x-forwarded-for'] = peer;
    out['x-forwarded-proto'] = input.publicProtocol;
    out['x-forwarded-host'] = input.publicHost;
    return out;
  }
  const prior = input.headers['x-forwarded-for'];
  const chain = Array.isArray(prior) ? prior.join(', ') : prior;
  out['x-forwarded-for'] = chain ? `${chain}, ${peer}` : peer;
  if (!input.headers['x-forwarded-proto']) out['x-forwarded-proto'] = input.publicProtocol;
  if (!input.headers['x-forwarded-host']) out['x-forwarded-host'] = input.publicHost;
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

/** Drops upstream Set-Cookie headers that would overwrite the gateway's own cookies. */
export function filterSetCookie(values: string[] | undefined, isOurs: (name: string) => boolean): string[] | undefined {
  if (!values) return undefined;
  return values.filter((v) => !isOurs(cookieName(v)));
}
