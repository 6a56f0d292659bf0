/**
 * server.trustProxy ranges (src/config/cidr.ts trustedRangeProblem), through the loader: a
 * range that takes in every address would trust every hop, so the client address (login rate
 * limit, logs) would be whatever the browser wrote in X-Forwarded-For. Pure.
 *
 * Fails if, in src/config/cidr.ts trustedRangeProblem, the line
 * `if (cidr.prefix === 0) return ...` is removed (0.0.0.0/0 then passes).
 */
import { randomBytes } from 'node:crypto';
import { configProblems } from '../../support/config.js';

const KEY = randomBytes(32).toString('base64');
const SECRET = randomBytes(30).toString('base64');

const problems = (trustProxy: unknown): string[] =>
  configProblems({
    server: { publicUrl: 'https://app.example.com', trustProxy },
    oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientSecret: 'top-secret-value' },
    session: { secrets: [SECRET], encryptionKeys: [KEY] },
  });

describe('server.trustProxy ranges', () => {
  it('refuses a /0 range, IPv4 or IPv6 (::/0 takes in IPv4 peers too), naming the entry by index', () => {
    expect(problems(['10.0.0.0/8', '0.0.0.0/0'])).toEqual([expect.stringMatching(/^server\.trustProxy\[1\]: is a \/0 range: every hop would be trusted/)]);
    expect(problems(['::/0'])).toEqual([expect.stringMatching(/^server\.trustProxy\[0\]: is a \/0 range/)]);
    expect(problems(['::ffff:0.0.0.0/0'])).toEqual([expect.stringMatching(/^server\.trustProxy\[0\]: is a \/0 range/)]);
  });

  it('refuses an IPv6 range that takes in every IPv4-mapped address (every IPv4 peer)', () => {
    for (const range of ['::/64', '::ffff:0:0/96', '::/80']) {
      expect(problems([range])).toEqual([expect.stringMatching(/^server\.trustProxy\[0\]: takes in every IPv4-mapped address/)]);
    }
    expect(problems(['::ffff:a00:0/104'])).toEqual([]);
  });

  // Fails if, in src/config/cidr.ts trustedRangeProblem, the width check goes
  // (`if (width < widest)` → `if (false)`): the two halves of the IPv4 space passed, one by
  // one, and together trusted every hop (found by red team: 30 logins from one client with a
  // spoofed X-Forwarded-For, all accepted past a limit of 5).
  it('refuses ranges wider than a private /8 (IPv6 /7), whose union can take in every address', () => {
    expect(problems(['0.0.0.0/1', '128.0.0.0/1'])).toEqual([
      expect.stringMatching(/^server\.trustProxy\[0\]: is wider than \/8: it takes in public addresses/),
      expect.stringMatching(/^server\.trustProxy\[1\]: is wider than \/8/),
    ]);
    expect(problems(['::ffff:0:0/97', '::ffff:8000:0/97'])).toEqual([
      expect.stringMatching(/^server\.trustProxy\[0\]: is wider than \/104/),
      expect.stringMatching(/^server\.trustProxy\[1\]: is wider than \/104/),
    ]);
    expect(problems(['2000::/3'])).toEqual([expect.stringMatching(/is wider than \/7/)]);
    expect(problems(['10.0.0.0/8', '100.64.0.0/10', '172.16.0.0/12', 'fc00::/7', '::ffff:a00:0/104'])).toEqual([]);
  });

  it("refuses host bits set past the prefix (10.0.0.1/8), naming the range's first address", () => {
    expect(problems(['10.0.0.1/8'])).toEqual(['server.trustProxy[0]: has bits set past its /8 prefix; write the range\'s first address (10.0.0.0/8)']);
    expect(problems(['10.0.0.129/25'])).toEqual([expect.stringMatching(/\(10\.0\.0\.128\/25\)$/)]);
    expect(problems(['fd00::1/8'])).toEqual([expect.stringMatching(/^server\.trustProxy\[0\]: has bits set past its \/8 prefix; .*\(fd00::\/8\)$/)]);
    expect(problems(['2001:db8::1:0:0:1/64'])).toEqual([expect.stringMatching(/\(2001:db8::\/64\)$/)]);
  });

  it('accepts ranges written as their first address, and single addresses', () => {
    expect(problems(['10.0.0.0/8', '10.0.0.128/25', '192.0.2.7', 'fd00::/8', '::1', 'fe80::/10', '1:2:3:4:5:6:1.2.3.0/120'])).toEqual([]);
    expect(problems(['not-an-address'])).toEqual(['server.trustProxy[0]: must be an IP address or CIDR range']);
  });
});
