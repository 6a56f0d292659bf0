/**
 * AES-256-GCM sealing of token material at rest (SPEC §5).
 *
 * Format: `v1.<kid>.<iv>.<ciphertext+tag>` (base64url parts). The key id is derived from the key
 * itself, so reordering `encryptionKeys` never breaks old values: the first key seals, every
 * key opens. Additional authenticated data binds a sealed value to its context (the session it
 * belongs to), so a value copied into another session's record does not open there.
 */
import { createCipheriv, createDecipheriv, createHash, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface Sealer {
  seal(plaintext: string, aad?: string): string;
  /** Returns undefined for anything that does not open: unknown key, tampering, garbage. */
  open(sealed: string, aad?: string): string | undefined;
  /** The key id new values are sealed with. */
  readonly currentKid: string;
  /** The key id a sealed value names, without opening it. */
  kidOf(sealed: string): string | undefined;
  /**
   * Whether a value names a key this process lacks: sealed by an instance configured with a
   * newer key (a roll of `encryptionKeys` under way), or with one removed since.
   */
  sealedElsewhere(sealed: string): boolean;
}

export function keyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, 8);
}

function kidOf(sealed: string): string | undefined {
  const parts = sealed.split('.');
  return parts.length === 4 && parts[0] === VERSION ? parts[1] : undefined;
}

/** @param base64Keys 32-byte keys, base64; the first seals, all open. */
export function createSealer(base64Keys: readonly string[]): Sealer {
  const raw = base64Keys.map((k) => Buffer.from(k, 'base64'));
  if (raw.length === 0 || raw.some((k) => k.length !== 32)) {
    throw new TypeError('encryption keys must be 32 bytes each');
  }
  // Imported once: handing cipheriv a Buffer re-imports the key on every call.
  const byKid = new Map<string, KeyObject>(raw.map((k) => [keyId(k), createSecretKey(k)] as const));
  const currentKid = keyId(raw[0] as Buffer);
  const current = byKid.get(currentKid) as KeyObject;

  return {
    currentKid,
    seal(plaintext, aad = '') {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', current, iv);
      cipher.setAAD(Buffer.from(aad, 'utf8'));
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
      return `${VERSION}.${currentKid}.${iv.toString('base64url')}.${body.toString('base64url')}`;
    },
    open(sealed, aad = '') {
      const parts = sealed.split('.');
      if (parts.length !== 4 || parts[0] !== VERSION) return undefined;
      const key = byKid.get(parts[1] as string);
      if (!key) return undefined;
      const iv = Buffer.from(parts[2] as string, 'base64url');
      const body = Buffer.from(parts[3] as string, 'base64url');
      if (iv.length !== IV_BYTES || body.length < TAG_BYTES) return undefined;
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
        decipher.setAAD(Buffer.from(aad, 'utf8'));
        decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
        return Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString('utf8');
      } catch {
        return undefined;
      }
    },
    kidOf,
    sealedElsewhere(sealed) {
      const kid = kidOf(sealed);
      return kid !== undefined && !byKid.has(kid);
    },
  };
}
