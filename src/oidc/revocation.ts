import * as oidc from 'openid-client';
import type { Logger } from '../observability/logger.js';
import type { ProviderHandle, ProviderState } from './client.js';
import { describeProviderError } from './errors.js';
import type { GrantedTokens } from './granted.js';
import type { TokenSet } from '../session/tokens.js';
import { within } from '../clock.js';

/** At most this many further access tokens (resource and exchanged ones) are revoked per session. */
export const MAX_EXTRA_REVOCATIONS = 16;

/**
 * RFC 7009, best effort: the refresh token first (revoking it ends the grant at most
 * providers), then the access token and `extraAccessTokens` (RFC 8707 resource tokens, RFC 8693
 * exchanged tokens: a provider that does not tie them to the grant would let them live on),
 * those at once, so that the whole takes at most two provider timeouts whatever their number.
 * Duplicates are sent once, and at most MAX_EXTRA_REVOCATIONS extra tokens. Never retried (a
 * failure is reported to `onError`). Resolves to the number of failed calls.
 */
export async function revokeTokens(
  provider: ProviderState,
  tokens: GrantedTokens,
  onError: (err: unknown) => void,
  extraAccessTokens: readonly string[] = [],
): Promise<number> {
  if (!provider.metadata.revocation_endpoint) return 0;
  let failures = 0;
  const revoke = async (token: string, hint: string) => {
    try {
      await oidc.tokenRevocation(provider.configuration, token, { token_type_hint: hint });
    } catch (err) {
      // RFC 7009 §2.2.1: providers answer this for self-contained (JWT) access tokens, which
      // they cannot revoke; the refresh token's revocation already ended the grant.
      if (err instanceof oidc.ResponseBodyError && err.error === 'unsupported_token_type') return;
      failures += 1;
      onError(err);
    }
  };
  if (tokens.refreshToken) await revoke(tokens.refreshToken, 'refresh_token');
  const access = [...new Set([tokens.accessToken, ...extraAccessTokens.slice(0, MAX_EXTRA_REVOCATIONS)])];
  await Promise.all(access.map((token) => revoke(token, 'access_token')));
  return failures;
}

/** The session's further access tokens: per resource (RFC 8707) and per exchange (RFC 8693). */
function extraAccessTokens(tokens: Pick<TokenSet, 'resources' | 'exchanged'>): string[] {
  const extra: string[] = [];
  for (const byKey of [tokens.resources, tokens.exchanged]) {
    if (!byKey) continue;
    for (const key of Object.keys(byKey)) {
      const token = byKey[key]?.accessToken;
      if (typeof token === 'string' && token.length > 0) extra.push(token);
    }
  }
  return extra;
}

/**
 * How long POST /auth/logout and DELETE /auth/sessions/{id} wait for the revocation before
 * answering. A provider answers in far less; one whose revocation endpoint hangs held the answer
 * (two calls in turn, each up to the provider timeout: 20 s), and with it the cookie's clearing
 * and the end-session URL, past what a load balancer or an SPA waits. The revocation goes on.
 */
export const REVOCATION_WAIT_MS = 2000;

export type RevokableTokens = GrantedTokens & Pick<TokenSet, 'resources' | 'exchanged'>;

/**
 * Revocations in flight at once, and waiting for a turn. A back-channel logout ends every
 * session of a user or provider session at once, and a user may hold any number: one logout
 * token for 2,000 sessions opened 2,000 connections to the provider together. Past the queue,
 * a revocation is dropped and logged (the session has ended all the same; what its end
 * journaled is tried again later, session/revocation-outbox.ts).
 */
export const MAX_REVOCATIONS_IN_FLIGHT = 16;
export const MAX_REVOCATIONS_QUEUED = 10_000;

export interface RevokerOptions {
  waitMs?: number;
  inFlight?: number;
  queued?: number;
  /** The revocation itself (revokeTokens above; replaced in unit tests). */
  revokeTokens?: typeof revokeTokens;
  /**
   * Told how each session's revocation ended: `failure` when any of its tokens was not revoked
   * (or the provider's metadata is not loaded), `dropped` past the queue. Only a log line said
   * so, and no alert could see a revocation endpoint failing at every logout (found by red team).
   */
  onOutcome?: (outcome: RevocationOutcome) => void;
}

export type RevocationOutcome = 'success' | 'failure' | 'dropped';

/**
 * Best-effort revocation (RFC 7009) of a session that has already ended locally: a slow or
 * failing provider is logged, never allowed to keep the session alive, and not retried here
 * (session/revocation-outbox.ts retries what an end journaled). Resolves once the revocation is
 * done or `waitMs` has passed, whichever is first; never rejects nor throws. `settled` is told
 * how it ended (also past the wait; counted as under way until it returns).
 */
export interface Revoker {
  (tokens: RevokableTokens | undefined, settled?: (outcome: RevocationOutcome) => Promise<void> | void): Promise<void>;
  /** Revocations still under way (those that outlived their caller's wait, the background ones). */
  underWay(): number;
  /** Resolves once none is under way (those started meanwhile included), or after `ms`. */
  settle(ms: number): Promise<void>;
  /** Counts `work` (a revocation's prelude and the revocation it may start) as under way. */
  track(work: Promise<void>): void;
}

export function createRevoker(provider: ProviderHandle, logger: Logger, options: RevokerOptions = {}): Revoker {
  const { waitMs = REVOCATION_WAIT_MS, inFlight = MAX_REVOCATIONS_IN_FLIGHT, queued = MAX_REVOCATIONS_QUEUED } = options;
  const revokeWith = options.revokeTokens ?? revokeTokens;
  const failed = (err: unknown) => logger.warn({ event: 'revocation_failed', reason: describeProviderError(err) }, 'token revocation failed');
  const pending = new Set<Promise<void>>();
  let running = 0;
  const waiting: (() => void)[] = [];
  let dropping = false;

  /** A turn to revoke: now, once one in flight ends, or undefined when the queue is full. */
  function turn(): Promise<void> | undefined {
    if (running < inFlight) {
      running += 1;
      return Promise.resolve();
    }
    if (waiting.length >= queued) return undefined;
    return new Promise<void>((resolve) => waiting.push(resolve));
  }
  /** The turn passes to the first in the queue (still counted as running), or is given back. */
  function passTurn(): void {
    const next = waiting.shift();
    if (next) next();
    else running -= 1;
    if (waiting.length === 0) dropping = false;
  }

  /** `settled` told `outcome` at once (counted and tracked: a release is a Redis command). */
  function endedAt(outcome: RevocationOutcome, settled: ((outcome: RevocationOutcome) => Promise<void> | void) | undefined): Promise<void> {
    options.onOutcome?.(outcome);
    if (settled) track(Promise.resolve().then(() => settled(outcome)).catch(() => undefined));
    return Promise.resolve();
  }

  function revoke(tokens: RevokableTokens | undefined, settled?: (outcome: RevocationOutcome) => Promise<void> | void): Promise<void> {
    if (!tokens) return Promise.resolve();
    if (!provider.isReady()) return endedAt('failure', settled);
    const mine = turn();
    if (mine === undefined) {
      // Once per overflow: a burst past the queue is one line, not one per session.
      if (!dropping) logger.warn({ event: 'revocation_dropped', queued: waiting.length }, 'too many revocations waiting; dropping the ones past the queue');
      dropping = true;
      return endedAt('dropped', settled);
    }
    let anyFailed = false;
    const failedHere = (err: unknown) => {
      anyFailed = true;
      failed(err);
    };
    // revokeTokens is async: whatever fails in it rejects, and is logged, never thrown at the caller.
    const finished = mine
      .then(() => revokeWith(provider.get(), tokens, failedHere, extraAccessTokens(tokens)))
      .then(() => undefined, failedHere)
      .finally(passTurn)
      .then(async () => {
        const outcome = anyFailed ? 'failure' : 'success';
        options.onOutcome?.(outcome);
        await settled?.(outcome);
      })
      .catch(() => undefined);
    track(finished);
    return within(finished, waitMs, undefined, { unref: true });
  }

  function track(work: Promise<void>): void {
    pending.add(work);
    void work.then(() => pending.delete(work));
  }

  async function settle(ms: number): Promise<void> {
    const deadline = performance.now() + ms;
    while (pending.size > 0 && performance.now() < deadline) {
      await within(Promise.allSettled([...pending]), deadline - performance.now(), []);
    }
  }

  return Object.assign(revoke, { underWay: () => pending.size, settle, track });
}
