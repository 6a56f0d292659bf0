/**
 * What the login rate limit counts (config/cidr.ts clientBucket): an IPv4 address, or an IPv6
 * address's /64, however it is written.
 */
import { clientBucket } from '../../../src/config/cidr.js';

describe('clientBucket', () => {
  it('counts an IPv4 address as itself, IPv4-mapped IPv6 included', () => {
    expect(clientBucket('203.0.113.7')).toBe('203.0.113.7');
    expect(clientBucket('::ffff:203.0.113.7')).toBe('203.0.113.7');
  });

  it('counts every address of one IPv6 /64 as one, however written', () => {
    const buckets = ['2001:db8:1:2::1', '2001:db8:1:2::ffff', '2001:0db8:0001:0002:abcd:0:0:9', '2001:DB8:1:2:FFFF:FFFF:FFFF:FFFF', '2001:db8:1:2::1%eth0'].map(clientBucket);
    expect(new Set(buckets)).toEqual(new Set(['2001:db8:1:2::/64']));
    expect(clientBucket('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(clientBucket('2001:db8::1')).toBe('2001:db8::/64');
  });

  // Fails if clientBucket's EMBEDS_IPV4 line is removed: every IPv4 client of a NAT64 or SIIT
  // front end shared one /64, one login budget for all of them.
  it('counts an IPv4 client behind a translator by its IPv4 address', () => {
    expect(clientBucket('64:ff9b::192.0.2.1')).toBe('192.0.2.1');
    expect(clientBucket('64:ff9b::c633:6407')).toBe('198.51.100.7');
    expect(clientBucket('::ffff:0:192.0.2.1')).toBe('192.0.2.1');
    expect(clientBucket('::ffff:c000:201')).toBe('192.0.2.1');
    expect(clientBucket('::192.0.2.1')).toBe('192.0.2.1');
    expect(clientBucket('64:ff9b:1::1')).toBe('64:ff9b:1::/64');
  });

  it('passes anything that is no address through, to be counted as it is', () => {
    expect(clientBucket('')).toBe('');
    expect(clientBucket('not an address')).toBe('not an address');
  });
});
