/**
 * Every Redis key name, one builder per kind. Keys derived from secrets (session IDs, state,
 * jti) hold only a SHA-256 of them, so a Redis dump yields no usable cookie or state value.
 * A session's keys share a `{hash tag}` so that Redis Cluster keeps them in one slot.
 */
import { createHash } from 'node:crypto';

export function digest(value: string): string {
  return createHash('sha256').update(value).digest('base64url').slice(0, 32);
}

export interface Keys {
  /** Session record, by digest of the session ID. */
  session(sessionDigest: string): string;
  /** Refresh lock of one session (same slot as the session). */
  refreshLock(sessionDigest: string): string;
  /** Login transaction, by digest of `state`. */
  transaction(stateDigest: string): string;
  /** Sorted set of login transactions in progress (state digest, scored by expiry). */
  activeTransactions(): string;
  /** A user's sessions: handle -> session digest. */
  userSessions(userDigest: string): string;
  /** Provider session (`sid`) -> the sessions it covers. */
  providerSession(sidDigest: string): string;
  /** A back-channel logout of a provider session, noted for sign-ins still under way (session/provider-logouts.ts). */
  providerSessionEnded(sidDigest: string): string;
  /** Back-channel logout replay cache, by digest of `jti`. */
  logoutJti(jtiDigest: string): string;
  /** Login rate-limit counter for one client address (its window runs on Redis's clock). */
  loginRate(addressDigest: string): string;
  /** Client-credentials token cache and its lock, per (scopes, resource). */
  clientToken(cacheKey: string): string;
  clientTokenLock(cacheKey: string): string;
  /**
   * Cooldown of forced renewals after an upstream refused a token (401 invalid_token): one per
   * session and resource (same slot as the session; `resourceDigest` empty for the sign-in
   * token), one per client-token cache key.
   */
  refusedSessionToken(sessionDigest: string, resourceDigest: string): string;
  refusedClientToken(cacheKey: string): string;
  /** Latest DPoP-Nonce of one server, by digest of its origin (redis/dpop-nonces.ts). */
  dpopNonce(originDigest: string): string;
  /** Pub/sub channel announcing ended sessions (closes WebSockets on every instance). */
  endedChannel(): string;
  /** Written after session ends, so that WAIT on its own connection covers them (createReplicaAcks). */
  replicationMark(): string;
  /** A session's end and its reason, remembered for a while (session/registry.ts end). */
  endedSession(sessionDigest: string): string;
  /**
   * A record an end that revokes took, kept sealed as it was stored until its tokens are revoked
   * (session/revocation-outbox.ts): a logout's retry reclaims it (registry.reclaim), any
   * process's sweep revokes from it.
   */
  takenRecord(sessionDigest: string): string;
  /**
   * Sorted set of the sessions whose kept record still owes its revocation, scored by when a
   * process last took it up (Redis time, ms; session/revocation-outbox.ts).
   */
  revocationOutbox(): string;
  /** The sign-in that replaced a session, while another sign-in of the same browser may still come (registry.succeed). */
  successor(sessionDigest: string): string;
  /** The version of a session's token set whose refresh-token grant is under way (session/refresh.ts). */
  refreshing(sessionDigest: string): string;
  /**
   * The session another sign-in of the same browser made while this one was in flight, by digest
   * of its login cookie, or of the pair of two sign-ins' login cookies (registry.rivals).
   */
  predecessor(bindingDigest: string): string;
}

export function createKeys(prefix: string): Keys {
  return {
    session: (d) => `${prefix}sess:{${d}}`,
    refreshLock: (d) => `${prefix}lock:{${d}}`,
    transaction: (d) => `${prefix}tx:${d}`,
    activeTransactions: () => `${prefix}tx-active`,
    userSessions: (d) => `${prefix}user:{${d}}`,
    providerSession: (d) => `${prefix}sid:{${d}}`,
    providerSessionEnded: (d) => `${prefix}sid-out:{${d}}`,
    logoutJti: (d) => `${prefix}jti:${d}`,
    loginRate: (d) => `${prefix}rl:login:${d}`,
    clientToken: (k) => `${prefix}cc:{${k}}`,
    clientTokenLock: (k) => `${prefix}cc-lock:{${k}}`,
    refusedSessionToken: (d, r) => `${prefix}refused:{${d}}:${r}`,
    refusedClientToken: (k) => `${prefix}cc-refused:{${k}}`,
    dpopNonce: (d) => `${prefix}dpop-nonce:${d}`,
    endedChannel: () => `${prefix}ended`,
    replicationMark: () => `${prefix}replication-mark`,
    endedSession: (d) => `${prefix}ended-sess:{${d}}`,
    takenRecord: (d) => `${prefix}taken:{${d}}`,
    revocationOutbox: () => `${prefix}revocations`,
    successor: (d) => `${prefix}successor:{${d}}`,
    predecessor: (d) => `${prefix}predecessor:${d}`,
    refreshing: (d) => `${prefix}refreshing:{${d}}`,
  };
}
