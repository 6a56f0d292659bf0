import { randomBytes } from 'node:crypto';
import { createSealer, keyId } from '../../../src/crypto/seal.js';

const key = () => randomBytes(32).toString('base64');

describe('sealing tokens with AES-256-GCM', () => {
  const a = key();
  const b = key();

  it('round-trips, with a fresh IV every time', () => {
    const sealer = createSealer([a]);
    const one = sealer.seal('access-token-value', 'session-1');
    const two = sealer.seal('access-token-value', 'session-1');
    expect(one).not.toBe(two);
    expect(one).not.toContain('access-token-value');
    expect(sealer.open(one, 'session-1')).toBe('access-token-value');
  });

  it('names the key it was sealed with, derived from the key itself', () => {
    const sealed = createSealer([a]).seal('x');
    expect(sealed.split('.')[1]).toBe(keyId(Buffer.from(a, 'base64')));
  });

  it('does not open under a key it was not sealed with', () => {
    expect(createSealer([b]).open(createSealer([a]).seal('x'))).toBeUndefined();
  });

  it('does not open when any byte of the ciphertext is changed', () => {
    const sealer = createSealer([a]);
    const sealed = sealer.seal('secret payload');
    const parts = sealed.split('.');
    const body = Buffer.from(parts[3] as string, 'base64url');
    for (const index of [0, body.length - 1]) {
      const tampered = Buffer.from(body);
      tampered[index] = (tampered[index] as number) ^ 1;
      expect(sealer.open([parts[0], parts[1], parts[2], tampered.toString('base64url')].join('.'))).toBeUndefined();
    }
  });

  it('does not open in another context (associated data)', () => {
    const sealer = createSealer([a]);
    expect(sealer.open(sealer.seal('x', 'session-1'), 'session-2')).toBeUndefined();
  });

  it('opens values sealed under an older key after rotation, and seals new ones with the first key', () => {
    const old = createSealer([a]).seal('before rotation');
    const rotated = createSealer([b, a]);
    expect(rotated.open(old)).toBe('before rotation');
    expect(rotated.kidOf(rotated.seal('after'))).toBe(rotated.currentKid);
    expect(rotated.kidOf(old)).not.toBe(rotated.currentKid);
  });

  it('returns undefined for garbage instead of throwing', () => {
    const sealer = createSealer([a]);
    for (const junk of ['', 'v1', 'v1.x.y.z', 'v2.a.b.c', 'v1..AAAA.AAAA', `v1.${sealer.currentKid}.AAAA.AAAA`]) {
      expect(sealer.open(junk)).toBeUndefined();
    }
  });

  it('refuses keys that are not 32 bytes', () => {
    expect(() => createSealer([Buffer.alloc(16).toString('base64')])).toThrow(/32 bytes/);
    expect(() => createSealer([])).toThrow();
  });
});
