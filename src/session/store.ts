/**
 * express-session's Store on top of SessionRecords. Keys are digests of the session ID, so a
 * Redis dump holds no usable cookie value. There is deliberately no `touch`: `get` already
 * slides the idle TTL with GETEX, so a steady-state request costs one Redis command and never
 * rewrites the session.
 */
import session from 'express-session';
import type { SessionData } from 'express-session';
import { digest } from '../redis/keys.js';
import { storeUnavailable } from '../redis/errors.js';
import type { AuthData, SealedTokens } from './data.js';
import type { SessionRecords, StoredSession } from './records.js';

declare module 'express-session' {
  interface SessionData {
    auth?: AuthData;
    tokens?: SealedTokens;
  }
}

type Callback<T = void> = (err?: unknown, value?: T) => void;

export class RedisSessionStore extends session.Store {
  constructor(private readonly records: SessionRecords) {
    super();
  }

  override get(sid: string, callback: (err: unknown, session?: SessionData | null) => void): void {
    this.records.load(digest(sid)).then(
      (stored) => callback(null, stored && isStoredCookie(stored.cookie) ? toSessionData(stored) : null),
      (err: unknown) => callback(storeUnavailable(err)),
    );
  }

  override set(sid: string, data: SessionData, callback?: Callback): void {
    this.records.write(digest(sid), toStored(data)).then(
      () => callback?.(),
      (err: unknown) => callback?.(storeUnavailable(err)),
    );
  }

  override destroy(sid: string, callback?: Callback): void {
    this.records.remove(digest(sid)).then(
      () => callback?.(),
      (err: unknown) => callback?.(storeUnavailable(err)),
    );
  }
}

/**
 * express-session rebuilds its Cookie from this member, which is not sealed (only `auth` is), and
 * throws on a missing or mistyped one: a record written by anyone with Redis access (no key
 * needed) answered 500 at every gateway endpoint, logout and sign-in included, for as long as
 * the browser kept trying. Anything it would throw on reads as no session.
 */
function isStoredCookie(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const c = value as Record<string, unknown>;
  return (
    (c.expires == null || typeof c.expires === 'string') &&
    (c.originalMaxAge == null || typeof c.originalMaxAge === 'number') &&
    (c.maxAge == null || typeof c.maxAge === 'number')
  );
}

function toSessionData(stored: StoredSession): SessionData {
  const { tokens, ...rest } = stored;
  return { ...(rest as unknown as SessionData), tokens: tokens.sealed ? tokens : undefined };
}

function toStored(data: SessionData): StoredSession {
  const { tokens, ...rest } = data;
  return { ...(rest as Record<string, unknown>), tokens: tokens ?? { v: 0, sealed: '' } };
}
