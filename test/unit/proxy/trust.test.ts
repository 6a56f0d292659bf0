/**
 * Trusted hops and the client address (src/proxy/trust.ts), pure.
 * Mutation check: make the walk in `clientAddress` take the left-most entry
 * (`return normaliseAddress(chain[0] ?? peer)` after the peer check): the one-hop cases fail.
 */
import { parseCidr } from '../../../src/config/cidr.js';
import { clientAddress, compileTrust, forwardedFor } from '../../../src/proxy/trust.js';

describe('clientAddress', () => {
  it('is the socket peer when no hop is trusted, whatever the browser wrote', () => {
    expect(clientAddress('203.0.113.5', '198.51.100.1', compileTrust(false))).toBe('203.0.113.5');
  });

  it('with one trusted hop, is the entry that hop appended (right-most), never a spoofed left-most one', () => {
    const one = compileTrust(true);
    expect(clientAddress('10.0.0.2', '198.51.100.1, 203.0.113.5', one)).toBe('203.0.113.5');
    expect(clientAddress('10.0.0.2', ['198.51.100.1', '203.0.113.5'], one)).toBe('203.0.113.5');
    // A hop that appended nothing: the peer itself is all we know.
    expect(clientAddress('10.0.0.2', undefined, one)).toBe('10.0.0.2');
  });

  it('with N hops, walks N entries out and no further', () => {
    expect(clientAddress('10.0.0.2', '198.51.100.1, 203.0.113.5, 10.0.0.9', compileTrust(2))).toBe('203.0.113.5');
    expect(clientAddress('10.0.0.2', '203.0.113.5', compileTrust(3))).toBe('203.0.113.5');
  });

  it('with a CIDR list, walks while hops are inside it', () => {
    const lb = compileTrust(['10.0.0.0/8', 'fd00::/8']);
    expect(clientAddress('10.1.2.3', '198.51.100.1, 203.0.113.5, 10.9.9.9', lb)).toBe('203.0.113.5');
    expect(clientAddress('192.0.2.1', '198.51.100.1', lb)).toBe('192.0.2.1');
    expect(clientAddress('::ffff:10.1.2.3', '203.0.113.5', lb)).toBe('203.0.113.5');
    expect(clientAddress('fd00::1', '2001:db8::7', lb)).toBe('2001:db8::7');
  });

  // Fails if, in proxy/trust.ts clientAddress, `normaliseAddress(entryAddress(chain[i] as string))`
  // goes back to `normaliseAddress(chain[i] as string)`: the port stays in the key.
  it('reads an entry written with its port (Azure Application Gateway) as its address', () => {
    const one = compileTrust(true);
    expect(clientAddress('10.0.0.2', '203.0.113.5:51234', one)).toBe('203.0.113.5');
    expect(clientAddress('10.0.0.2', '198.51.100.1, 203.0.113.5:443', one)).toBe('203.0.113.5');
    expect(clientAddress('10.0.0.2', '[2001:db8::7]:51234', one)).toBe('2001:db8::7');
    expect(clientAddress('10.0.0.2', '[2001:db8::7]', one)).toBe('2001:db8::7');
    expect(clientAddress('10.0.0.2', '[::ffff:203.0.113.5]:80', one)).toBe('203.0.113.5');
    // A bare IPv6 address is not an address with a port.
    expect(clientAddress('10.0.0.2', '2001:db8::7', one)).toBe('2001:db8::7');
    // With ports stripped, trusted hops are still recognised and walked past.
    expect(clientAddress('10.1.2.3', '203.0.113.5:1000, 10.9.9.9:2000', compileTrust(['10.0.0.0/8']))).toBe('203.0.113.5');
  });

  // Fails if, in proxy/trust.ts clientAddress, the junk check goes back to after `client = addr`.
  it('stops at an entry that is not an IP address (no proxy of ours writes one), keeping the nearest address known', () => {
    expect(clientAddress('10.1.2.3', '203.0.113.5, unknown', compileTrust(['10.0.0.0/8']))).toBe('10.1.2.3');
    expect(clientAddress('10.1.2.3', '203.0.113.5, unknown, 10.9.9.9', compileTrust(['10.0.0.0/8']))).toBe('10.9.9.9');
    expect(clientAddress('10.0.0.2', 'unknown', compileTrust(true))).toBe('10.0.0.2');
    for (const junk of ['203.0.113.5:x', '203.0.113.5:1:2', '[2001:db8::7]:', '[2001:db8::7', '_hidden']) {
      expect([junk, clientAddress('10.0.0.2', junk, compileTrust(true))]).toEqual([junk, '10.0.0.2']);
    }
  });
});

describe('parseCidr and forwardedFor', () => {
  it('accepts addresses and ranges of both families and refuses the rest', () => {
    expect(parseCidr('10.0.0.0/8')).toEqual({ address: '10.0.0.0', prefix: 8, family: 'ipv4' });
    expect(parseCidr('2001:db8::/32')).toEqual({ address: '2001:db8::', prefix: 32, family: 'ipv6' });
    expect(parseCidr('192.0.2.7')).toEqual({ address: '192.0.2.7', prefix: 32, family: 'ipv4' });
    for (const bad of ['10.0.0.0/33', '10.0.0.0/x', 'example.com', '10.0.0.0/', '']) expect(parseCidr(bad)).toBeUndefined();
  });

  it('splits repeated and comma-joined headers, dropping empty entries', () => {
    expect(forwardedFor(['a, b', 'c', ' , d'])).toEqual(['a', 'b', 'c', 'd']);
    expect(forwardedFor(undefined)).toEqual([]);
  });
});
