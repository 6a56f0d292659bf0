/** IP addresses and CIDR ranges in config values (server.trustProxy). Pure. */
import { isIP } from 'node:net';

export interface Cidr {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** IPv4-mapped IPv6 (`::ffff:10.0.0.1`, how a dual-stack socket reports IPv4 peers) as IPv4. */
export function normaliseAddress(addr: string): string {
  return addr.toLowerCase().startsWith('::ffff:') && isIP(addr.slice(7)) === 4 ? addr.slice(7) : addr;
}

/** `10.0.0.0/8`, `fd00::/8` or a single address (a full-length prefix); undefined if malformed. */
export function parseCidr(value: string): Cidr | undefined {
  const slash = value.indexOf('/');
  const address = normaliseAddress(slash === -1 ? value : value.slice(0, slash));
  const version = isIP(address);
  if (version === 0) return undefined;
  const max = version === 4 ? 32 : 128;
  if (slash !== -1 && !/^\d{1,3}$/.test(value.slice(slash + 1))) return undefined;
  const prefix = slash === -1 ? max : Number(value.slice(slash + 1));
  if (prefix > max) return undefined;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}
