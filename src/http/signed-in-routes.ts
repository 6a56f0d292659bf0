/**
 * The signed-in session's own endpoints under authPath (SPEC §3): GET /user, POST /logout.
 */
import type { Request, Response } from 'express';
import type { Config } from '../config/load.js';
import type { Logger } from '../observability/logger.js';
import type { ProviderHandle } from '../oidc/client.js';
import { endSessionUrl } from '../oidc/flows.js';
import { grantedScopes } from '../oidc/granted.js';
import { digest } from '../redis/keys.js';
import { withStore } from '../redis/errors.js';
import { sessionEndsAt } from '../session/data.js';
import type { EndedRevocations } from '../session/ended-revocations.js';
import type { SessionRegistry } from '../session/registry.js';
import type { TokenVault } from '../session/vault.js';
import { clearSessionCookie, clearSiteData, destroy, requireSignedIn, type createCookieVerifier } from './session-cookie.js';

export interface SignedInDeps {
  config: Config;
  provider: ProviderHandle;
  vault: TokenVault;
  registry: SessionRegistry;
  logger: Logger;
  revocations: EndedRevocations;
  clock: () => number;
  /** The session cookie's verifier (createCookieVerifier), shared with the sign-in endpoints. */
  verifySessionCookie: ReturnType<typeof createCookieVerifier>;
}

/** Epoch seconds as an ISO date; null when unknown or past what a Date holds (a record from before auth_time was range-checked). */
function isoDate(seconds: number | undefined): string | null {
  const date = new Date(seconds === undefined ? NaN : seconds * 1000);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}

export function createSignedInHandlers(deps: SignedInDeps): { user(req: Request, res: Response): void; logout(req: Request, res: Response): Promise<void> } {
  const { config, provider, vault, registry, logger, revocations, clock, verifySessionCookie } = deps;
  const { derived } = config;

  function user(req: Request, res: Response): void {
    const auth = requireSignedIn(req);
    const absoluteEnd = sessionEndsAt(auth, config.session.absoluteTimeoutSeconds);
    const idleEnd = clock() + config.session.idleTimeoutSeconds * 1000;
    const sealed = req.session.tokens?.sealed;
    const tokens = sealed ? vault.open(digest(req.sessionID), sealed) : undefined;
    res.json({
      sub: auth.sub,
      claims: auth.claims,
      // As routes check them (proxy/bearer.ts): a refresh may have narrowed them since sign-in.
      scopes: tokens ? grantedScopes(auth.scopes, tokens) : auth.scopes,
      sessionExpiresAt: new Date(Math.min(absoluteEnd, idleEnd)).toISOString(),
      acr: auth.acr ?? null,
      authTime: isoDate(auth.authTime),
    });
  }

  /**
   * The session a logout ends, and the tokens to revoke: `taken`, those the record held as it
   * went (a refresh may have replaced the ones this request read), else `read`, those this
   * request read. The record is kept until its tokens are revoked, so that should Redis take
   * the removal after this request gave up on it (503), or the process die revoking (found by
   * the workers red team: the tokens lived on, and the retry sent no one to the provider's
   * logout), the retry, finding no session, reclaims it and revokes and ends the provider's
   * session as the first would have. Once the record is taken the session is over: destroy()
   * (a DEL of what is gone) is best effort, and a copy never released is revoked by a sweep.
   */
  async function endForLogout(req: Request): Promise<{ sessionDigest: string; handle: string | undefined; taken: string | undefined; read: string | undefined } | undefined> {
    const auth = req.session.auth;
    if (auth) {
      const sessionDigest = digest(req.sessionID);
      const read = req.session.tokens?.sealed;
      const stored = await withStore(() => registry.end(sessionDigest, 'logout'));
      await destroy(req).catch(() => undefined);
      return { sessionDigest, handle: auth.handle, taken: stored?.tokens.sealed, read };
    }
    const earlier = verifySessionCookie(req.headers.cookie)?.digest;
    if (earlier === undefined) return undefined;
    const kept = await withStore(() => registry.reclaim(earlier));
    return kept && { sessionDigest: earlier, handle: kept.auth?.handle, taken: kept.tokens.sealed, read: undefined };
  }

  async function logout(req: Request, res: Response): Promise<void> {
    let logoutUrl = '/';
    // Local logout first: a slow or failing provider never keeps the session alive.
    const ended = await endForLogout(req);
    if (ended) {
      const tokens = vault.openEnded(ended.sessionDigest, ended.taken ?? ended.read);
      if (provider.isReady()) {
        logoutUrl = endSessionUrl(provider.get(), config.oidc, tokens?.idToken, derived.postLogoutRedirectUri) ?? '/';
      }
      await revocations.revokeEnded(ended.sessionDigest, ended.taken, tokens);
      // Just before this answer clears the cookie: another tab's sign-in done meanwhile goes too.
      const successors = await registry.endSuccessors(ended.sessionDigest, 'logout').catch(() => []);
      revocations.revokeAll(successors);
      logger.info({ event: 'logout', ...(ended.handle ? { session: ended.handle } : {}) }, 'signed out');
    }
    clearSessionCookie(res, config);
    // API answers and storage the browser kept are not shown to its next user.
    clearSiteData(res);
    res.json({ logoutUrl });
  }

  return { user, logout };
}
