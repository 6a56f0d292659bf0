import { generateDpopKey } from '../../../src/crypto/dpop.js';
import { DEFAULT_TOKEN_LIFETIME_SECONDS, expiresWithin, lifeOf, parseTokenSet, renewalMargin } from '../../../src/session/tokens.js';

describe('token expiry', () => {
  it('is due for refresh inside the skew window and after expiry, not before', () => {
    expect(expiresWithin({ expiresAt: 1000 }, 30, 960)).toBe(false);
    expect(expiresWithin({ expiresAt: 1000 }, 30, 970)).toBe(true);
    expect(expiresWithin({ expiresAt: 1000 }, 0, 1001)).toBe(true);
  });
  it('renews a token at most half its lifetime before it expires', () => {
    expect(renewalMargin({ expiresAt: 1000, lifetime: 3600 }, 30)).toBe(30);
    expect(renewalMargin({ expiresAt: 1000, lifetime: 40 }, 30)).toBe(20);
    expect(renewalMargin({ expiresAt: 1000, lifetime: 0 }, 30)).toBe(0);
    expect(renewalMargin({ expiresAt: 1000 }, 30)).toBe(30);
    expect(expiresWithin({ expiresAt: 1000, lifetime: 10 }, 30, 994)).toBe(false);
    expect(expiresWithin({ expiresAt: 1000, lifetime: 10 }, 30, 995)).toBe(true);
  });
  it('gives a token without a stated expiry the default life, and keeps a stated one', () => {
    expect(lifeOf({}, 100)).toEqual({ expiresAt: 100 + DEFAULT_TOKEN_LIFETIME_SECONDS, lifetime: DEFAULT_TOKEN_LIFETIME_SECONDS });
    expect(lifeOf({ expiresAt: 160, lifetime: 60 }, 100)).toEqual({ expiresAt: 160, lifetime: 60 });
    expect(lifeOf({ expiresAt: 160 }, 100)).toEqual({ expiresAt: 160 });
  });
  it('never refreshes a token with no known expiry', () => {
    expect(expiresWithin({}, 30, 10 ** 12)).toBe(false);
  });
  it('parses only token-set-shaped JSON', () => {
    expect(parseTokenSet('{"accessToken":"a"}')).toEqual({ accessToken: 'a' });
    expect(parseTokenSet('{"refreshToken":"a"}')).toBeUndefined();
    expect(parseTokenSet('nope')).toBeUndefined();
  });
  it('keeps a DPoP key only when it is a P-256 private JWK (else the set reads as unbound)', () => {
    // Mutation check: in parseTokenSet, drop the `isDpopPrivateJwk` line → the malformed key is kept.
    const key = generateDpopKey();
    expect(parseTokenSet(JSON.stringify({ accessToken: 'a', dpopKey: key }))?.dpopKey).toEqual(key);
    expect(parseTokenSet(JSON.stringify({ accessToken: 'a', dpopKey: { ...key, crv: 'P-384' } }))).toEqual({ accessToken: 'a' });
    expect(parseTokenSet(JSON.stringify({ accessToken: 'a', dpopKey: 'x' }))).toEqual({ accessToken: 'a' });
  });
});
