/**
 * DPoP keys, proofs and challenge parsing (src/crypto/dpop.ts, pure), checked against jose (a
 * second, independent implementation of the same RFCs).
 *
 * Mutation that fails it (checked by hand): in src/crypto/dpop.ts jwkThumbprint, list the
 * members out of order (`{"kty":...,"crv":...}`): the thumbprint no longer matches jose's.
 */
import { createPublicKey, verify } from 'node:crypto';
import { calculateJwkThumbprint, EmbeddedJWK, jwtVerify } from 'jose';
import {
  accessTokenHash,
  createProofSigner,
  generateDpopKey,
  isDpopPrivateJwk,
  jwkThumbprint,
  parseNonce,
  proofClaims,
  publicJwk,
} from '../../../src/crypto/dpop.js';
import { dpopChallenge, retryForNonce, type DpopAttachment } from '../../../src/proxy/dpop-proofs.js';

describe('DPoP keys', () => {
  it('makes P-256 keys whose RFC 7638 thumbprint is the one jose computes', async () => {
    const key = generateDpopKey();
    expect(isDpopPrivateJwk(key)).toBe(true);
    expect(jwkThumbprint(key)).toBe(await calculateJwkThumbprint(publicJwk(key)));
    expect(publicJwk(key)).not.toHaveProperty('d');
  });

  it('refuses shapes that are not a P-256 private JWK', () => {
    const key = generateDpopKey();
    expect(isDpopPrivateJwk({ ...key, crv: 'P-384' })).toBe(false);
    expect(isDpopPrivateJwk({ ...key, d: undefined })).toBe(false);
    expect(isDpopPrivateJwk({ ...key, x: 'short' })).toBe(false);
    expect(isDpopPrivateJwk(null)).toBe(false);
  });
});

describe('DPoP proofs', () => {
  it('signs a dpop+jwt (ES256, public jwk in the header) that jose verifies, with htm, htu, ath, jti, iat and nonce', async () => {
    const key = generateDpopKey();
    const signer = createProofSigner(key);
    const now = Math.floor(Date.now() / 1000);
    const proof = signer.proof({ htm: 'GET', htu: 'https://api.example/x', accessToken: 'tok', nonce: 'n-1' }, now);
    const { payload, protectedHeader } = await jwtVerify(proof, EmbeddedJWK, { typ: 'dpop+jwt', algorithms: ['ES256'] });
    expect(payload).toMatchObject({ htm: 'GET', htu: 'https://api.example/x', iat: now, ath: accessTokenHash('tok'), nonce: 'n-1' });
    expect(typeof payload.jti).toBe('string');
    expect(protectedHeader.jwk).toEqual(publicJwk(key));
    expect(signer.jkt).toBe(jwkThumbprint(key));
    // The JWS signature is raw r||s (64 bytes), as RFC 7518 §3.4 says, not DER.
    const [h, p, s] = proof.split('.');
    expect(Buffer.from(s ?? '', 'base64url')).toHaveLength(64);
    const pub = createPublicKey({ key: { ...publicJwk(key) }, format: 'jwk' });
    expect(verify('sha256', Buffer.from(`${h}.${p}`), { key: pub, dsaEncoding: 'ieee-p1363' }, Buffer.from(s ?? '', 'base64url'))).toBe(true);
  });

  it('gives every proof its own jti', () => {
    const signer = createProofSigner(generateDpopKey());
    const jtis = new Set(Array.from({ length: 50 }, () => JSON.parse(Buffer.from(signer.proof({ htm: 'GET', htu: 'https://a/' }, 1).split('.')[1] ?? '', 'base64url').toString()).jti));
    expect(jtis.size).toBe(50);
  });

  it('leaves ath and nonce out when there is no token or nonce (token endpoint, first call)', () => {
    expect(proofClaims({ htm: 'POST', htu: 'https://idp/token' }, 5, 'j')).toEqual({ jti: 'j', htm: 'POST', htu: 'https://idp/token', iat: 5 });
  });

  it('hashes the access token as RFC 9449 §4.2 says (base64url SHA-256 of its ASCII)', () => {
    // RFC 9449 §7.1 example token and ath.
    expect(accessTokenHash('Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU')).toBe('fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo');
  });
});

describe('DPoP challenges and nonces', () => {
  it.each([
    ['DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof"', 'use_dpop_nonce'],
    ['Bearer realm="x", DPoP algs="ES256", error="use_dpop_nonce"', 'use_dpop_nonce'],
    ['dpop error=invalid_token', 'invalid_token'],
    ['DPoP realm="api", error="invalid_dpop_proof"', 'invalid_dpop_proof'],
  ])('reads the error of %s', (header, error) => {
    expect(dpopChallenge(header)?.error).toBe(error);
  });

  it('finds no DPoP error in a Bearer challenge, or none at all', () => {
    expect(dpopChallenge('Bearer error="use_dpop_nonce"')).toBeUndefined();
    expect(dpopChallenge('Bearer error="invalid_token", DPoP algs="ES256"')).toEqual({});
    expect(dpopChallenge(undefined)).toBeUndefined();
    expect(dpopChallenge(`DPoP error="${'x'.repeat(9000)}"`)).toBeUndefined();
    // Review of issue 15: a DPoP challenge inside another challenge's quoted string is none.
    // Mutation that fails it: the old regex reader (search for /(?:^|[\s,])DPoP(?:\s|$)/i).
    expect(dpopChallenge('Bearer realm="x, DPoP error=use_dpop_nonce"')).toBeUndefined();
    expect(dpopChallenge('Bearer realm="DPoP error=\\"use_dpop_nonce\\"", DPoP algs="ES256"')).toEqual({});
  });

  it('takes a nonce of NQCHARs only', () => {
    expect(parseNonce('eyJ7S_zG.eyJH0-Z.HX4w-7v')).toBe('eyJ7S_zG.eyJH0-Z.HX4w-7v');
    expect(parseNonce('has space')).toBeUndefined();
    expect(parseNonce('quote"')).toBeUndefined();
    expect(parseNonce('')).toBeUndefined();
    expect(parseNonce(['a', 'b'])).toBeUndefined();
    expect(parseNonce('x'.repeat(2000))).toBeUndefined();
  });

  it('retries once on use_dpop_nonce with a nonce, for a body-less request; keeps any new nonce', () => {
    const seen: string[] = [];
    const attachment: DpopAttachment = { proof: () => 'p', nonce: (n) => void seen.push(n) };
    const challenge = { statusCode: 401, headers: { 'www-authenticate': 'DPoP error="use_dpop_nonce"', 'dpop-nonce': 'n1' } };
    expect(retryForNonce({ attachment, bodyless: true }, challenge, false)).toBe(true);
    expect(retryForNonce({ attachment, bodyless: true }, challenge, true)).toBe(false);
    expect(retryForNonce({ attachment, bodyless: false }, challenge, false)).toBe(false);
    expect(retryForNonce({ attachment, bodyless: true }, { statusCode: 401, headers: { 'www-authenticate': 'DPoP error="use_dpop_nonce"' } }, false)).toBe(false);
    expect(retryForNonce({ attachment, bodyless: true }, { statusCode: 200, headers: { 'dpop-nonce': 'n2' } }, false)).toBe(false);
    expect(seen).toEqual(['n1', 'n1', 'n1', 'n2']);
  });
});
