/**
 * Session records in Redis: one string key per session, holding the express-session blob with
 * the sealed token set and its version spliced in front:
 *
 *     {"tv":3,"tok":"v1.kid.iv.ct", ...rest of the session as JSON }
 *
 * Why this shape: a proxied call needs one command (GETEX, which also slides the idle TTL), and
 * the token set can still be replaced atomically by compare-and-set on `tv` with a short Lua
 * script that never has to decode the JSON (Lua's cjson would, for instance, turn `[]` into
 * `{}`). Every whole-record write also goes through Lua and keeps the stored token set when it
 * is newer than the one being written, so no request can put an older token set back
 * (connect-redis #75/#346, express-openid-connect #408).
 *
 * The `auth` part is sealed (record-codec.ts) and opened when a record is parsed; view() parses
 * only when the stored bytes change, so a steady stream of proxied calls verifies it once.
 */
import type { Sealer } from '../crypto/seal.js';
import { createWriteCoalescer, existsMany, type RedisClient } from '../redis/client.js';
import { createTimed, type RedisObserver } from '../redis/timing.js';
import type { Keys } from '../redis/keys.js';
import { sessionEndsAt, type AuthData, type SealedTokens } from './data.js';
import { createRecordCodec, type StoredSession } from './record-codec.js';
import { createBoundedCache, type BoundedCache } from './bounded-cache.js';

export { deserializeRecord, serializeRecord, type RawRecord, type StoredSession } from './record-codec.js';

/**
 * GET and DEL the record, then note the end (ARGV[1], its reason; KEYS[2], same {digest} slot),
 * record or not; an end that revokes (ARGV[3] '1') replaces an earlier note, one that does not
 * never replaces it: a later `replaced` end of a session already logged out would otherwise
 * hide that its tokens are to be revoked. With ARGV[4] '1' the record is kept, as stored (sealed),
 * under KEYS[3] for as long as the note.
 */
const TAKE = `
local val = redis.call('GET', KEYS[1])
if val then
  redis.call('DEL', KEYS[1])
  if ARGV[4] == '1' then redis.call('SET', KEYS[3], val, 'EX', ARGV[2]) end
end
if ARGV[1] ~= '' and (ARGV[3] == '1' or redis.call('EXISTS', KEYS[2]) == 0) then
  redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
end
return val
`;

/**
 * SET the whole record, but keep the stored token set if its version is newer; and never bring
 * back a session that was ended (its note, KEYS[2]): express-session saves a sign-in's record
 * again as its answer ends, after an end that came meanwhile (another tab's sign-in, a
 * back-channel logout) had removed it.
 */
const WRITE_RECORD = `
local val = ARGV[1]
local cur = redis.call('GET', KEYS[1])
if not cur and redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if cur then
  local tv, tok = string.match(cur, '^{"tv":(%d+),"tok":"([%w%._%-]*)"')
  if tv and tonumber(tv) > tonumber(ARGV[2]) then
    local rest = string.match(val, '^{"tv":%d+,"tok":"[%w%._%-]*"(.*)$')
    val = '{"tv":' .. tv .. ',"tok":"' .. tok .. '"' .. rest
  end
end
redis.call('SET', KEYS[1], val, 'EX', ARGV[3])
return 1`;

/**
 * Replace the token set iff the stored version is ARGV[1], keeping the TTL (read and re-set
 * explicitly rather than with KEEPTTL, which the demo's in-memory Redis does not honour).
 */
const CAS_TOKENS = `
local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
local tv = string.match(cur, '^{"tv":(%d+),"tok":"[%w%._%-]*"')
if not tv then return -2 end
if ARGV[4] == 'raise' then
  if tonumber(tv) >= tonumber(ARGV[2]) then return 0 end
elseif tv ~= ARGV[1] then return 0 end
local rest = string.match(cur, '^{"tv":%d+,"tok":"[%w%._%-]*"(.*)$')
local ttl = redis.call('PTTL', KEYS[1])
local val = '{"tv":' .. ARGV[2] .. ',"tok":"' .. ARGV[3] .. '"' .. rest
if ttl > 0 then redis.call('SET', KEYS[1], val, 'PX', ttl) else redis.call('SET', KEYS[1], val) end
return 1`;

export type CasResult = 'written' | 'stale' | 'missing';

/** The part of a session a proxied call needs, read-only (it may be shared between calls). */
export interface SessionView {
  readonly auth: Readonly<AuthData> | undefined;
  /** Undefined once the tokens were dropped. */
  readonly tokens: Readonly<SealedTokens> | undefined;
}

export interface SessionRecords {
  /** GETEX: reads and slides the idle TTL in one command. Expired-by-age sessions read as undefined. */
  load(digest: string): Promise<StoredSession | undefined>;
  /**
   * load() for the proxy path: the same GETEX, but the record is parsed once per distinct
   * stored value, and the result is frozen because it is shared.
   */
  view(digest: string): Promise<SessionView | undefined>;
  /** Reads without sliding the TTL (refresh re-checks, listings). */
  peek(digest: string): Promise<StoredSession | undefined>;
  /** Reads only the token head (version + sealed value). */
  peekTokens(digest: string): Promise<SealedTokens | undefined>;
  write(digest: string, session: StoredSession): Promise<void>;
  /** Writes `next` over version `expectedVersion` only. */
  casTokens(digest: string, expectedVersion: number, next: SealedTokens): Promise<CasResult>;
  /**
   * Writes `next` over any version below `next.v`: a set written again after a failover
   * (unreplicated-writes.ts), where the promoted replica may hold any earlier version of the chain.
   */
  raiseTokens(digest: string, next: SealedTokens): Promise<CasResult>;
  /** Deletes the record (what take() kept of it is revocation-outbox.ts's). */
  remove(digest: string): Promise<void>;
  /**
   * Deletes the record and returns what it held, read and deleted in one step (a refresh cannot
   * write a newer token set in between, to be deleted unseen). With `endedFor`, the end is
   * remembered with its reason for `ttlSeconds` (keys.endedSession), in the same step, and also
   * when there was no record: a sign-in between its index entry and its save (the one a
   * back-channel logout finds then) ends itself when it finds the note, and write() never
   * brings the record back. A removal that fails leaves no note. With `keep`, the record is also
   * kept for `ttlSeconds` (keys.takenRecord), until the outbox releases it.
   */
  take(digest: string, endedFor?: { reason: string; ttlSeconds: number; revokes: boolean; keep?: boolean }): Promise<StoredSession | undefined>;
  /** Remaining idle lifetime in ms (for "last active"), or undefined when gone. */
  remainingMs(digest: string): Promise<number | undefined>;
  /** Whether each session still exists, in order (pipelined batches; the held sessions' re-check). */
  exist(digests: readonly string[]): Promise<boolean[]>;
}

export interface SessionRecordsOptions {
  redis: RedisClient;
  keys: Keys;
  /** Seals and opens each record's `auth` part (the runtime's Sealer, the tokens' keys). */
  sealer: Sealer;
  idleTimeoutSeconds: number;
  absoluteTimeoutSeconds: number;
  clock?: () => number;
  /** The parsed views view() keeps, one per session (default: createViewCache()'s bounds). */
  viewCache?: ViewCache;
  /** Told the duration and outcome of every operation (metrics). */
  observe?: RedisObserver;
}

export interface CachedView {
  raw: Buffer;
  view: SessionView;
  endsAt: number | undefined;
}
export type ViewCache = BoundedCache<CachedView>;

/**
 * One parsed view per session, at most `maxEntries` and about `maxBytes`: the stored bytes
 * (kept to compare) and what parsing them made, about as many again.
 */
export function createViewCache(maxEntries = 10_000, maxBytes = 64 * 1024 * 1024): ViewCache {
  return createBoundedCache({ maxEntries, maxBytes, sizeOf: (cached: CachedView) => 2 * cached.raw.length + 1024 });
}

/**
 * A record that is there but does not verify (tampered, or its auth sealed with a key no longer
 * configured): signed out like no record, but not gone (the cookie is this browser's own, dead).
 */
export const UNREADABLE_VIEW: SessionView = Object.freeze({ auth: undefined, tokens: undefined });

function freezeView(session: StoredSession): SessionView {
  const auth = session.auth ? Object.freeze({ ...session.auth, scopes: Object.freeze([...session.auth.scopes]) }) : undefined;
  const tokens = session.tokens.sealed ? Object.freeze({ ...session.tokens }) : undefined;
  return Object.freeze({ auth: auth as Readonly<AuthData> | undefined, tokens });
}

/**
 * A key of another type where the record should be (WRONGTYPE): tampered, and so for good, not
 * a hiccup. Read as no record (signed out, as a record that does not open), not 503 on every
 * call, logout and sign-in included, until someone deletes the key.
 */
const wrongType = (err: unknown): boolean => err instanceof Error && err.name === 'ReplyError' && err.message.startsWith('WRONGTYPE');

export function createSessionRecords(options: SessionRecordsOptions): SessionRecords {
  const { redis, keys, idleTimeoutSeconds, absoluteTimeoutSeconds } = options;
  const codec = createRecordCodec(options.sealer);
  const clock = options.clock ?? Date.now;
  const holdWrites = createWriteCoalescer(redis);
  const timed = createTimed(options.observe);

  const outlivedAbsolute = (s: StoredSession) => s.auth !== undefined && sessionEndsAt(s.auth, absoluteTimeoutSeconds) <= clock();

  async function finish(digest: string, text: string | null): Promise<StoredSession | undefined> {
    if (text === null) return undefined;
    return live(digest, codec.deserialize(digest, text));
  }

  /** The session unless it outlived the absolute timeout (then it is deleted). */
  async function live(digest: string, session: StoredSession | undefined): Promise<StoredSession | undefined> {
    if (!session) return undefined;
    if (outlivedAbsolute(session)) {
      await redis.del(keys.session(digest));
      return undefined;
    }
    return session;
  }

  // The stored bytes are the cache's proof: a view is reused only while Redis returns the very
  // same value. The reply is read as a Buffer (a view on the socket's read, no string made) and
  // compared byte for byte; only a new value is decoded and parsed.
  const views = options.viewCache ?? createViewCache();
  // Synchronous when the stored bytes are the ones last seen (every steady-state call): no
  // promise and no extra turn of the microtask queue for the common case.
  function readView(digest: string, raw: Buffer | null): SessionView | undefined | Promise<SessionView | undefined> {
    if (raw === null) {
      views.delete(digest);
      return undefined;
    }
    const known = views.get(digest);
    if (known !== undefined && known.raw.equals(raw)) {
      if (known.endsAt === undefined || known.endsAt > clock()) return known.view;
    }
    views.delete(digest);
    return decodeView(digest, raw);
  }
  async function decodeView(digest: string, raw: Buffer): Promise<SessionView | undefined> {
    const stored = codec.deserialize(digest, raw.toString('utf8'));
    // Remembered like any view: a record that does not open is not tried again on every call.
    if (!stored) return remember(digest, raw, UNREADABLE_VIEW, undefined);
    const session = await live(digest, stored);
    if (!session) return undefined;
    return remember(digest, raw, freezeView(session), session.auth && sessionEndsAt(session.auth, absoluteTimeoutSeconds));
  }
  function remember(digest: string, raw: Buffer, view: SessionView, endsAt: number | undefined): SessionView {
    // A copy: the reply may be a slice of a much larger socket read, which it would keep alive.
    views.set(digest, { raw: Buffer.from(raw), view, endsAt });
    return view;
  }

  async function writeTokens(digest: string, expectedVersion: string, next: SealedTokens, mode: 'exact' | 'raise'): Promise<CasResult> {
    if (!/^[A-Za-z0-9._-]*$/.test(next.sealed)) throw new TypeError('sealed tokens must be base64url and dots');
    const result = await timed('session_cas', () => redis.eval(CAS_TOKENS, 1, keys.session(digest), expectedVersion, String(next.v), next.sealed, mode));
    return result === 1 ? 'written' : result === 0 ? 'stale' : 'missing';
  }

  return {
    load(digest) {
      return timed('session_read', async () => {
        holdWrites();
        let text: string | null;
        try {
          text = await redis.getex(keys.session(digest), 'EX', idleTimeoutSeconds);
        } catch (err) {
          if (wrongType(err)) return undefined;
          throw err;
        }
        return finish(digest, text);
      });
    },
    view(digest) {
      return timed('session_read', async () => {
        holdWrites();
        let raw: Buffer | null;
        try {
          raw = await redis.getexBuffer(keys.session(digest), 'EX', idleTimeoutSeconds);
        } catch (err) {
          if (wrongType(err)) return UNREADABLE_VIEW;
          throw err;
        }
        return readView(digest, raw);
      });
    },
    peek(digest) {
      return timed('session_peek', async () => finish(digest, await redis.get(keys.session(digest))));
    },
    async peekTokens(digest) {
      const session = await this.peek(digest);
      return session?.tokens;
    },
    async write(digest, session) {
      const text = codec.serialize(digest, session);
      await timed('session_write', () =>
        redis.eval(WRITE_RECORD, 2, keys.session(digest), keys.endedSession(digest), text, String(session.tokens?.v ?? 0), String(idleTimeoutSeconds)),
      );
    },
    casTokens: (digest, expectedVersion, next) => writeTokens(digest, String(expectedVersion), next, 'exact'),
    raiseTokens: (digest, next) => writeTokens(digest, '', next, 'raise'),
    async remove(digest) {
      await timed('session_delete', () => redis.del(keys.session(digest)));
    },
    async take(digest, endedFor) {
      const text = await timed('session_delete', () =>
        redis.eval(
          TAKE,
          3,
          keys.session(digest),
          keys.endedSession(digest),
          keys.takenRecord(digest),
          endedFor?.reason ?? '',
          endedFor?.ttlSeconds ?? 0,
          endedFor?.revokes ? '1' : '0',
          endedFor?.keep ? '1' : '0',
        ),
      );
      return typeof text === 'string' ? codec.deserialize(digest, text) : undefined;
    },
    async remainingMs(digest) {
      const ttl = await timed('session_ttl', () => redis.pttl(keys.session(digest)));
      return ttl >= 0 ? ttl : undefined;
    },
    exist(digests) {
      return timed('session_exists', () => existsMany(redis, digests.map((d) => keys.session(d))));
    },
  };
}
