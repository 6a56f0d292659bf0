/**
 * The session record as stored, with its `auth` part sealed.
 *
 * `auth` decides what a session may do (scopes, subject, provider session, the sign-in time the
 * absolute timeout counts from), so someone who can write to Redis but does not hold the
 * encryption keys must not be able to change it. It is sealed like the tokens (AES-256-GCM,
 * crypto/seal.ts), with the session digest in the associated data (RFC 5116 §3): a sealed auth
 * copied into another session's record does not open there, and a different label than the
 * tokens' keeps the two sealed values from standing in for each other.
 *
 *     {"tv":3,"tok":"v1.kid.iv.ct","auth":"v1.kid.iv.ct","cookie":{...}}
 *
 * A record whose auth does not open (tampered, foreign, or a 0.3.0 record with plaintext auth)
 * reads as no session: signed out, never "signed in with whatever the record says".
 */
import type { Sealer } from '../crypto/seal.js';
import type { AuthData, SealedTokens } from './data.js';

/** A stored session besides its tokens, at the JSON level: auth is still sealed (a string) here. */
export interface RawRecord {
  tokens: SealedTokens;
  [key: string]: unknown;
}

/** The decoded session: auth opened and checked. */
export interface StoredSession extends RawRecord {
  auth?: AuthData;
}

const HEAD = /^\{"tv":(\d+),"tok":"([A-Za-z0-9._-]*)"/;

/**
 * The token version and sealed token set go first, so that the Lua scripts of records.ts can
 * read and replace them with a pattern match, without decoding the JSON.
 */
export function serializeRecord(session: RawRecord): string {
  const { tokens, ...rest } = session;
  const sealed = tokens?.sealed ?? '';
  if (!/^[A-Za-z0-9._-]*$/.test(sealed)) throw new TypeError('sealed tokens must be base64url and dots');
  const body = JSON.stringify(rest);
  const head = `{"tv":${tokens?.v ?? 0},"tok":"${sealed}"`;
  return body === '{}' ? `${head}}` : `${head},${body.slice(1)}`;
}

export function deserializeRecord(text: string): RawRecord | undefined {
  const head = HEAD.exec(text);
  if (!head) return undefined;
  // The head is read by the regex; only the rest is parsed (the sealed value is most of the text).
  const after = text.slice(head[0].length);
  const restJson = after === '}' ? '{}' : after.startsWith(',') && after[1] !== '}' ? `{${after.slice(1)}` : undefined;
  if (restJson === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(restJson);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
    return { ...(parsed as Record<string, unknown>), tokens: { v: Number(head[1]), sealed: head[2] ?? '' } };
  } catch {
    return undefined;
  }
}

export interface RecordCodec {
  serialize(sessionDigest: string, session: StoredSession): string;
  /** undefined for anything that is not a well-formed record whose auth (if any) verifies. */
  deserialize(sessionDigest: string, text: string): StoredSession | undefined;
}

const authLabel = (sessionDigest: string) => `session-auth ${sessionDigest}`;

const isStringArray = (value: unknown): value is string[] => Array.isArray(value) && value.every((v) => typeof v === 'string');

/** The opened JSON, if it has the shape the gateway wrote (it always does unless a key leaked). */
export function parseAuth(json: string): AuthData | undefined {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const a = value as Record<string, unknown>;
  const ok =
    typeof a.handle === 'string' &&
    typeof a.sub === 'string' &&
    typeof a.iss === 'string' &&
    (a.sid === undefined || typeof a.sid === 'string') &&
    a.claims !== null &&
    typeof a.claims === 'object' &&
    !Array.isArray(a.claims) &&
    isStringArray(a.scopes) &&
    typeof a.createdAt === 'number' &&
    Number.isFinite(a.createdAt) &&
    (a.endsAt === undefined || (typeof a.endsAt === 'number' && Number.isFinite(a.endsAt))) &&
    (a.userAgent === undefined || typeof a.userAgent === 'string') &&
    // Optional: records written before step-up (0.4.0) have neither and still read.
    (a.acr === undefined || typeof a.acr === 'string') &&
    (a.authTime === undefined || (typeof a.authTime === 'number' && Number.isFinite(a.authTime)));
  return ok ? (a as unknown as AuthData) : undefined;
}

export function createRecordCodec(sealer: Sealer): RecordCodec {
  return {
    serialize(sessionDigest, session) {
      const { auth, ...rest } = session;
      const raw: RawRecord = auth === undefined ? { ...rest, tokens: session.tokens } : { ...rest, tokens: session.tokens, auth: sealer.seal(JSON.stringify(auth), authLabel(sessionDigest)) };
      return serializeRecord(raw);
    },
    deserialize(sessionDigest, text) {
      const stored = deserializeRecord(text);
      if (!stored) return undefined;
      if (!('auth' in stored)) return stored;
      const { auth: sealed, ...rest } = stored;
      // A plain object here is a 0.3.0 record or a forgery: neither is trusted.
      if (typeof sealed !== 'string') return undefined;
      const json = sealer.open(sealed, authLabel(sessionDigest));
      const auth = json === undefined ? undefined : parseAuth(json);
      return auth ? { ...rest, tokens: stored.tokens, auth } : undefined;
    },
  };
}
