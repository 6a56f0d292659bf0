import type { Logger } from '../observability/logger.js';
import type { ProviderHandle } from './client.js';
import { describeProviderError } from './errors.js';
import { revokeTokens, type GrantedTokens } from './flows.js';
import type { TokenSet } from '../session/tokens.js';

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
 * Best-effort revocation (RFC 7009) of a session that has already ended locally: a slow or
 * failing provider is logged, never allowed to keep the session alive, and never retried (the
 * session is gone, so nothing would remember to; the tokens expire on their own). Resolves once
 * the revocation is done or `waitMs` has passed, whichever is first; never rejects nor throws.
 */
export interface Revoker {
  (tokens: RevokableTokens | undefined): Promise<void>;
  /** Revocations still under way (those that outlived their caller's wait, the background ones). */
  underWay(): number;
  /** Resolves once none is under way (those started meanwhile included), or after `ms`. */
  settle(ms: number): Promise<void>;
  /** Counts `work` (a revocation's prelude and the revocation it may start) as under way. */
  track(work: Promise<void>): void;
}

export function createRevoker(provider: ProviderHandle, logger: Logger, waitMs = REVOCATION_WAIT_MS): Revoker {
  const failed = (err: unknown) => logger.warn({ event: 'revocation_failed', reason: describeProviderError(err) }, 'token revocation failed');
  const pending = new Set<Promise<void>>();

  function revoke(tokens: RevokableTokens | undefined): Promise<void> {
    if (!tokens || !provider.isReady()) return Promise.resolve();
    // revokeTokens is async: whatever fails in it rejects, and is logged, never thrown at the caller.
    const done = revokeTokens(provider.get(), tokens, failed, extraAccessTokens(tokens)).then(() => undefined, failed);
    track(done);
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, waitMs);
      timer.unref();
      void done.then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  function track(work: Promise<void>): void {
    pending.add(work);
    void work.then(() => pending.delete(work));
  }

  async function settle(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (pending.size > 0 && Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, deadline - Date.now());
      });
      await Promise.race([Promise.allSettled([...pending]), bound]);
      clearTimeout(timer);
    }
  }

  return Object.assign(revoke, { underWay: () => pending.size, settle, track });
}
