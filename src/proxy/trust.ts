/**
 * Which forwarding hops are trusted (server.trustProxy), and the client address that follows
 * from it. Pure; shared by the proxy path (forwarding headers) and the HTTP layer (rate limits,
 * logs) so that both read one request the same way.
 *
 * Hops are counted from the socket peer (index 0) outwards through X-Forwarded-For, right to
 * left. The client is the first hop that is not trusted: with `true` (exactly one trusted hop)
 * that is the entry the load balancer appended, never one the browser wrote further left.
 */
import { BlockList, isIP } from 'node:net';
import { normaliseAddress, parseCidr } from '../config/cidr.js';

export type TrustProxySetting = boolean | number | readonly string[];

/** Is the hop at `index` (0 = the socket peer), with address `addr`, a trusted proxy? */
export type TrustHop = (addr: string, index: number) => boolean;

export function compileTrust(setting: TrustProxySetting): TrustHop {
  if (setting === false) return () => false;
  if (setting === true) return (_addr, index) => index < 1;
  if (typeof setting === 'number') return (_addr, index) => index < setting;
  const list = new BlockList();
  for (const entry of setting) {
    const cidr = parseCidr(entry);
    if (!cidr) throw new TypeError(`not an address or CIDR range: ${entry}`);
    list.addSubnet(cidr.address, cidr.prefix, cidr.family);
  }
  return (addr) => {
    const a = normaliseAddress(addr);
    const version = isIP(a);
    return version !== 0 && list.check(a, version === 4 ? 'ipv4' : 'ipv6');
  };
}

/** The X-Forwarded-For entries, left (oldest) to right (nearest). */
export function forwardedFor(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  const text = Array.isArray(header) ? header.join(',') : header;
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

const IPV4_WITH_PORT = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/;
const BRACKETED = /^\[([^\]]+)\](?::\d{1,5})?$/;

/**
 * An X-Forwarded-For entry without the port some proxies append (Azure Application Gateway
 * writes `a.b.c.d:port` and `[v6]:port`): the address is the client, not the source port it
 * happened to use. Anything else is returned as it is (a bare IPv6 address has colons too).
 */
export function entryAddress(entry: string): string {
  if (entry.charCodeAt(0) === 91 /* [ */) return BRACKETED.exec(entry)?.[1] ?? entry;
  if (entry.indexOf(':') === -1 || entry.indexOf(':') !== entry.lastIndexOf(':')) return entry;
  return IPV4_WITH_PORT.exec(entry)?.[1] ?? entry;
}

/**
 * The client address: walk from the socket peer outwards while the hops are trusted. An entry
 * that is not an IP address (once its port is taken off) stops the walk: it cannot be a proxy
 * of ours, nor be the client's address. Then the client is the nearest address known, the last
 * trusted hop, as when that hop appended nothing: junk written by a hop (`unknown`, `_hidden`)
 * must not become a rate-limit key.
 */
export function clientAddress(remote: string | undefined, xff: string | string[] | undefined, trust: TrustHop): string {
  const peer = normaliseAddress(remote ?? '');
  if (!trust(peer, 0)) return peer;
  const chain = forwardedFor(xff);
  let client = peer;
  for (let i = chain.length - 1, hop = 1; i >= 0; i--, hop++) {
    const addr = normaliseAddress(entryAddress(chain[i] as string));
    if (isIP(addr) === 0) break;
    client = addr;
    if (!trust(addr, hop)) break;
  }
  return client;
}
