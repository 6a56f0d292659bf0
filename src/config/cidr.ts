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

/**
 * What a per-client limit counts: an IPv4 address as it is, an IPv6 address by its /64. One host
 * routinely holds a whole /64 (SLAAC privacy addresses, a cloud VM's range): counted address by
 * address, a single machine is never limited (RFC 6177, RFC 8981).
 */
export function clientBucket(addr: string): string {
  return bucketOf(addr, 64);
}

/**
 * A client's network, for what one network may hold of a shared capacity: an IPv4 address as it
 * is, an IPv6 one by its /48, what one site is given (RFC 6177): its /64s, 65,536 of them, cost
 * nothing to change between.
 */
export function networkBucket(addr: string): string {
  return bucketOf(addr, 48);
}

function bucketOf(addr: string, v6Prefix: 48 | 64): string {
  const address = normaliseAddress(addr);
  if (isIP(address) !== 6) return address;
  const bytes = addressBytes({ address, prefix: 128, family: 'ipv6' });
  // An IPv4 client behind a translator (NAT64, SIIT) is its IPv4 address, not one /64 for all.
  if (EMBEDS_IPV4.some((prefix) => samePrefix(bytes, prefix, 96))) return bytes.slice(12).join('.');
  return `${formatAddress(bytes.map((b, i) => (i < v6Prefix / 8 ? b : 0)), 'ipv6')}/${v6Prefix}`;
}

/** /96 prefixes whose last 32 bits are an IPv4 address: 64:ff9b::/96 (RFC 6052), ::ffff:0:0/96, ::ffff:0:0:0/96 (RFC 7915), ::/96. */
const EMBEDS_IPV4 = [
  [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0],
  [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff],
  [0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0],
  [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
];

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

/**
 * Why a range that parses is still refused as a trusted-proxy range, or undefined. A range that
 * takes in every address trusts every hop, so the client address would be whatever the browser
 * wrote in X-Forwarded-For; a range with host bits set is a typo whose meaning is a guess.
 */
export function trustedRangeProblem(cidr: Cidr): string | undefined {
  if (cidr.prefix === 0) return `is a /0 range: every hop would be trusted, so a browser could write its own client address; list your proxies' ranges`;
  const bytes = addressBytes(cidr);
  // A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d, which such a range takes in.
  if (cidr.family === 'ipv6' && cidr.prefix <= 96 && samePrefix(bytes, IPV4_MAPPED, cidr.prefix)) {
    return 'takes in every IPv4-mapped address (::ffff:0:0/96): every IPv4 hop would be trusted; list your proxies\' ranges';
  }
  // Judged one by one, two halves (0.0.0.0/1 and 128.0.0.0/1) passed and together trusted every
  // hop. No proxy's range is wider than a private /8 (IPv6: the unique-local fc00::/7): wider
  // ones take in public addresses, and together they can take in all.
  const mapped = cidr.family === 'ipv6' && samePrefix(bytes, IPV4_MAPPED, 96);
  const width = mapped ? cidr.prefix - 96 : cidr.prefix;
  const widest = cidr.family === 'ipv4' || mapped ? 8 : 7;
  if (width < widest) {
    return `is wider than /${mapped ? 96 + widest : widest}: it takes in public addresses, and such ranges together can trust every hop; list your proxies' ranges`;
  }
  const network = bytes.map((b, i) => b & maskByte(cidr.prefix, i));
  if (network.some((b, i) => b !== bytes[i])) {
    return `has bits set past its /${cidr.prefix} prefix; write the range's first address (${formatAddress(network, cidr.family)}/${cidr.prefix})`;
  }
  return undefined;
}

const IPV4_MAPPED = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0];

/** The bits of byte `i` that lie inside a prefix of `prefix` bits. */
const maskByte = (prefix: number, i: number) => (0xff00 >> Math.min(8, Math.max(0, prefix - i * 8))) & 0xff;

const samePrefix = (a: number[], b: number[], prefix: number) => a.every((byte, i) => ((byte ^ (b[i] ?? 0)) & maskByte(prefix, i)) === 0);

/** The address's bytes; it was accepted by isIP (a zone, `%eth0`, is dropped as BlockList does). */
function addressBytes(cidr: Cidr): number[] {
  if (cidr.family === 'ipv4') return cidr.address.split('.').map(Number);
  const groups = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((g) => {
          if (!g.includes('.')) return [parseInt(g, 16)];
          const [a = 0, b = 0, c = 0, d = 0] = g.split('.').map(Number);
          return [(a << 8) | b, (c << 8) | d];
        });
  const bare = cidr.address.split('%')[0] ?? '';
  const gap = bare.indexOf('::');
  const head = groups(gap === -1 ? bare : bare.slice(0, gap));
  const tail = gap === -1 ? [] : groups(bare.slice(gap + 2));
  const all = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  return all.flatMap((g) => [g >> 8, g & 0xff]);
}

function formatAddress(bytes: number[], family: Cidr['family']): string {
  if (family === 'ipv4') return bytes.join('.');
  const groups = [];
  for (let i = 0; i < 16; i += 2) groups.push((((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0)).toString(16));
  // The URL parser writes the shortest form (RFC 5952).
  return new URL(`http://[${groups.join(':')}]`).hostname.slice(1, -1);
}
