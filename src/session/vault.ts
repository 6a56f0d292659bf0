/**
 * Seals and opens a session's token set. The session digest is the AEAD's associated data, so
 * a sealed value copied into another session's record does not open there.
 */
import type { Sealer } from '../crypto/seal.js';
import { parseTokenSet, type TokenSet } from './tokens.js';

export interface TokenVault {
  seal(sessionDigest: string, tokens: TokenSet): string;
  /** undefined when the value does not open (unknown key, tampering) or is not a token set. */
  open(sessionDigest: string, sealed: string): TokenSet | undefined;
  /** True when the value was sealed with a key other than the current one (rotation). */
  isStale(sealed: string): boolean;
}

export function createTokenVault(sealer: Sealer): TokenVault {
  return {
    seal: (d, tokens) => sealer.seal(JSON.stringify(tokens), d),
    open(d, sealed) {
      const json = sealer.open(sealed, d);
      return json === undefined ? undefined : parseTokenSet(json);
    },
    isStale: (sealed) => sealer.kidOf(sealed) !== sealer.currentKid,
  };
}
