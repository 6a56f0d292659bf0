import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { createSealer } from '../../../src/crypto/seal.js';
import type { AuthData } from '../../../src/session/data.js';
import { createRecordCodec, deserializeRecord, serializeRecord } from '../../../src/session/record-codec.js';

const sealer = createSealer([randomBytes(32).toString('base64')]);
const codec = createRecordCodec(sealer);
const auth: AuthData = {
  handle: 'h1',
  sub: 'alice',
  iss: 'https://idp.example',
  sid: 'provider-session',
  claims: { name: 'Alice' },
  scopes: ['openid', 'orders:read'],
  createdAt: 1_700_000_000_000,
  userAgent: 'UA',
};
const tokens = { v: 2, sealed: 'v1.kid.iv.ct' };
const D = 'digest-of-session-a';

describe('session record codec (sealed auth)', () => {
  it('round-trips, and the stored text holds no part of auth in the clear', () => {
    const text = codec.serialize(D, { tokens, auth, cookie: { path: '/' } });
    expect(text.startsWith('{"tv":2,"tok":"v1.kid.iv.ct",')).toBe(true);
    for (const clear of ['alice', 'orders:read', 'provider-session', 'Alice', String(auth.createdAt)]) expect(text).not.toContain(clear);
    expect(typeof (JSON.parse(text) as { auth: unknown }).auth).toBe('string');
    expect(codec.deserialize(D, text)).toEqual({ tokens, auth, cookie: { path: '/' } });
  });

  it('reads a record without auth as it is', () => {
    const text = codec.serialize(D, { tokens: { v: 0, sealed: '' }, cookie: { path: '/' } });
    expect(codec.deserialize(D, text)).toEqual({ tokens: { v: 0, sealed: '' }, cookie: { path: '/' } });
  });

  it('reads a 0.3.0 record (auth as plain JSON) as no session', () => {
    const old = serializeRecord({ tokens, auth, cookie: { path: '/' } });
    expect(codec.deserialize(D, old)).toBeUndefined();
  });

  it('reads a record whose auth was rewritten in Redis as no session (a scope added, the sign-in time moved)', () => {
    const text = codec.serialize(D, { tokens, auth });
    const raw = JSON.parse(text) as Record<string, unknown>;
    for (const forged of [{ ...auth, scopes: [...auth.scopes, 'admin:write'] }, { ...auth, createdAt: Date.now() }]) {
      expect(codec.deserialize(D, serializeRecord({ tokens, ...raw, auth: forged }))).toBeUndefined();
    }
  });

  it("does not open another session's sealed auth, nor the sealed token set in its place", () => {
    const other = JSON.parse(codec.serialize('digest-of-session-b', { tokens, auth })) as { auth: string };
    expect(codec.deserialize(D, serializeRecord({ tokens, auth: other.auth }))).toBeUndefined();
    const sealedTokens = sealer.seal(JSON.stringify({ accessToken: 'at' }), D);
    expect(codec.deserialize(D, serializeRecord({ tokens: { v: 1, sealed: sealedTokens }, auth: sealedTokens }))).toBeUndefined();
  });

  it('reads any change to the sealed auth as no session', () => {
    const text = codec.serialize(D, { tokens, auth });
    const sealed = (JSON.parse(text) as { auth: string }).auth;
    fc.assert(
      fc.property(fc.nat({ max: sealed.length - 1 }), fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.'), (at, ch) => {
        const changed = sealed.slice(0, at) + ch + sealed.slice(at + 1);
        fc.pre(changed !== sealed);
        const result = codec.deserialize(D, serializeRecord({ tokens, auth: changed }));
        // Base64url's last character can carry unused bits: a change there may decode to the same bytes.
        if (result !== undefined) expect(result.auth).toEqual(auth);
      }),
      { numRuns: 300 },
    );
  });

  it('reads the acr and auth_time of a step-up sign-in, and a 0.4.0 auth without them, refusing them malformed', () => {
    const stepped = { ...auth, acr: 'urn:bff:acr:mfa', authTime: 1_700_000_000 };
    expect(codec.deserialize(D, codec.serialize(D, { tokens, auth: stepped }))?.auth).toEqual(stepped);
    expect(codec.deserialize(D, codec.serialize(D, { tokens, auth }))?.auth).toEqual(auth);
    for (const bad of [{ acr: 7 }, { authTime: '2024' }, { authTime: Number.NaN }]) {
      const forged = { ...auth, ...bad } as unknown as AuthData;
      expect(codec.deserialize(D, codec.serialize(D, { tokens, auth: forged }))).toBeUndefined();
    }
  });

  it('reads an auth that opens but has the wrong shape as no session', () => {
    for (const bad of [{ ...auth, scopes: 'admin' }, { ...auth, createdAt: 'soon' }, { sub: 'alice' }, [auth], null]) {
      const sealedBad = sealer.seal(JSON.stringify(bad), `session-auth ${D}`);
      expect(codec.deserialize(D, serializeRecord({ tokens, auth: sealedBad }))).toBeUndefined();
    }
  });

  it('leaves the record format to the plain layer (junk is still no session)', () => {
    expect(codec.deserialize(D, '{"tv":1,"tok":"x",}')).toBeUndefined();
    expect(deserializeRecord(codec.serialize(D, { tokens }))).toEqual({ tokens });
  });
});
