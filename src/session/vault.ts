/**
 * Seals and opens a session's token set. The session digest is the AEAD's associated data, so
 * a sealed value copied into another session's record does not open there.
 */
import type { Sealer } from '../crypto/seal.js';
import { createBoundedCache, type BoundedCache } from './bounded-cache.js';
import { sessionGone } from './gone.js';
import { parseTokenSet, type TokenSet } from './tokens.js';

export interface TokenVault {
  seal(sessionDigest: string, tokens: TokenSet): string;
  /** undefined when the value does not open (unknown key, tampering) or is not a token set. */
  open(sessionDigest: string, sealed: string): TokenSet | undefined;
  /**
   * open() for a session a call acts on. A value sealed with a key this process does not hold
   * (an instance with a newer config wrote it: a key roll under way; or the key was removed)
   * throws sessionGone(): the call is refused as for a session ended elsewhere, its cookie
   * kept. Read as no tokens, the call cleared the cookie and signed the user out for good.
   * undefined only for a value that does not open here otherwise (tampered).
   */
  openHere(sessionDigest: string, sealed: string): TokenSet | undefined;
  /** Drops what this process remembers of a session's opened tokens (it ended). */
  forget(sessionDigest: string): void;
  /**
   * open() for a session that ended (to revoke its tokens): nothing is remembered of it. An end
   * that found no record has no tokens to give (`sealed` undefined).
   */
  openEnded(sessionDigest: string, sealed: string | undefined): TokenSet | undefined;
}

/** By session: the latest sealed value seen and what it opened to. */
export interface OpenedTokens {
  sealed: string;
  tokens: TokenSet;
}
export type OpenedCache = BoundedCache<OpenedTokens>;

/** At most `maxEntries` token sets and about `maxBytes`: the sealed text and the set it opened to. */
export function createOpenedCache(maxEntries = 10_000, maxBytes = 64 * 1024 * 1024): OpenedCache {
  return createBoundedCache({ maxEntries, maxBytes, sizeOf: (entry: OpenedTokens) => 2 * entry.sealed.length + 512 });
}

/**
 * @param opened the sessions' opened token sets. An entry is used only while the stored sealed
 *   value is the very one it came from (each write has a fresh IV), so a steady stream of calls
 *   on one session opens its tokens once, not once per call.
 */
export function createTokenVault(sealer: Sealer, opened: OpenedCache = createOpenedCache()): TokenVault {
  function open(d: string, sealed: string): TokenSet | undefined {
    const hit = opened.get(d);
    if (hit && hit.sealed === sealed) return hit.tokens;
    const json = sealer.open(sealed, d);
    const tokens = json === undefined ? undefined : parseTokenSet(json);
    if (tokens) opened.set(d, { sealed, tokens });
    return tokens;
  }
  return {
    seal: (d, tokens) => sealer.seal(JSON.stringify(tokens), d),
    open,
    openHere(d, sealed) {
      const tokens = open(d, sealed);
      if (tokens === undefined && sealer.sealedElsewhere(sealed)) throw sessionGone();
      return tokens;
    },
    forget: (d) => opened.delete(d),
    openEnded(d, sealed) {
      opened.delete(d);
      const json = sealed === undefined ? undefined : sealer.open(sealed, d);
      return json === undefined ? undefined : parseTokenSet(json);
    },
  };
}
