/**
 * A user's sessions (GET/DELETE /auth/sessions) and Back-Channel Logout
 * (POST /auth/backchannel-logout). SPEC §3.
 */
import express, { Router, type Request, type RequestHandler, type Response } from 'express';
import type { Config } from '../config/load.js';
import { GatewayError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { describeProviderError } from '../oidc/errors.js';
import { failureLogGate } from '../clock.js';
import type { ProviderHandle } from '../oidc/client.js';
import { LogoutTokenRefused, verifyLogoutToken } from '../oidc/logout-token.js';
import { digest, type Keys } from '../redis/keys.js';
import { withStore } from '../redis/errors.js';
import { remember } from '../redis/replay.js';
import { tryLock } from '../redis/lock.js';
import type { RedisClient } from '../redis/client.js';
import type { SessionRegistry } from '../session/registry.js';
import { MAX_CLOCK_SKEW_SECONDS } from '../clock.js';
import type { EndedRevocations } from '../session/ended-revocations.js';
import { requireCsrf } from './csrf.js';
import { clearSessionCookie, requireSignedIn } from './session-cookie.js';

export interface SessionRouteDeps {
  config: Config;
  provider: ProviderHandle;
  registry: SessionRegistry;
  redis: RedisClient;
  keys: Keys;
  sessionMiddleware: RequestHandler;
  logger: Logger;
  metrics: Metrics;
  clock: () => number;
  /** The runtime's revocations of ended sessions (journaled; shutdown waits for what is under way). */
  revocations: EndedRevocations;
}

const HANDLE = /^[A-Za-z0-9_-]{1,64}$/;
/**
 * How long a back-channel logout's claim on its jti holds while its sessions are ended: past
 * the longest an end takes, short enough that a provider's retry after a claim left behind
 * (Redis lost both the end and the claim's release) is taken soon.
 */
const JTI_CLAIM_SECONDS = 30;
/** How old (by iat) a logout token may be; BCL §4 encourages providers to use about 2 minutes. */
export const LOGOUT_TOKEN_MAX_AGE_SECONDS = 300;

export function createSessionRoutes(deps: SessionRouteDeps): Router {
  const { config, provider, registry, logger, metrics, revocations } = deps;
  // A logout token the provider signed and this gateway refused (a clock skew, an audience or
  // claim mismatch) leaves the user signed in here after their logout there: counted and said
  // (once per 10 s per reason), where it was a debug line only (found by the observability red
  // team). An unsigned or forged one is anybody's to send: counted only.
  const mayLogRefusal = failureLogGate(deps.clock);
  function noteRefused(err: LogoutTokenRefused): void {
    metrics.backchannelLogouts.inc({ outcome: err.signed ? 'refused' : 'invalid' });
    if (!err.signed) return;
    const suppressed = mayLogRefusal(err.reason);
    if (suppressed !== undefined) {
      logger.warn(
        { event: 'backchannel_logout_refused', reason: err.reason, cause: err.cause === undefined ? undefined : describeProviderError(err.cause), suppressed },
        "a logout token the provider signed was refused: that user's sessions here live on (said once per 10 s per reason)",
      );
    }
  }
  const csrf = requireCsrf(config.csrf.headerName);
  const router = Router();


  async function list(req: Request, res: Response): Promise<void> {
    const auth = requireSignedIn(req);
    const sessions = await withStore(() => registry.list(auth.iss, auth.sub));
    res.json(
      sessions.map((s) => ({
        id: s.handle,
        createdAt: new Date(s.auth.createdAt).toISOString(),
        lastActiveAt: new Date(s.lastActiveAt).toISOString(),
        userAgent: s.auth.userAgent ?? null,
        current: s.handle === auth.handle,
      })),
    );
  }

  async function end(req: Request, res: Response): Promise<void> {
    const auth = requireSignedIn(req);
    const id = req.params.id;
    if (typeof id !== 'string' || !HANDLE.test(id)) throw new GatewayError('not_found');
    // Only the caller's own sessions are visible: another user's handle is simply unknown.
    const target = (await withStore(() => registry.list(auth.iss, auth.sub))).find((s) => s.handle === id);
    if (!target) throw new GatewayError('not_found');
    const stored = await withStore(() => registry.end(target.digest, 'revoked'));
    await revocations.revokeEnded(target.digest, stored?.tokens.sealed);
    if (target.digest === digest(req.sessionID)) clearSessionCookie(res, config);
    logger.info({ event: 'session_ended', session: id, by: auth.handle }, 'session ended by its user');
    res.status(204).end();
  }

  async function backchannelLogout(req: Request, res: Response): Promise<void> {
    const body = req.body as Record<string, unknown> | undefined;
    const token = body?.logout_token;
    if (typeof token !== 'string' || token.length === 0 || token.length > 16_384) {
      throw new GatewayError('invalid_request', { description: 'A single logout_token form parameter is required.' });
    }
    const state = provider.get();
    let logout: Awaited<ReturnType<typeof verifyLogoutToken>>;
    try {
      logout = await verifyLogoutToken(token, state.jwks, {
        issuer: state.metadata.issuer,
        clientId: config.oidc.clientId,
        algorithms: config.oidc.idTokenSigningAlgs,
        clockToleranceSeconds: config.oidc.clockToleranceSeconds,
        maxAgeSeconds: LOGOUT_TOKEN_MAX_AGE_SECONDS,
        // The provider's tokens are judged by wall time, like every JWT the provider issues
        // (the injected clock drives the gateway's own expiry decisions).
        now: Date.now,
      });
    } catch (err) {
      if (err instanceof LogoutTokenRefused) noteRefused(err);
      throw err;
    }
    const jtiKey = deps.keys.logoutJti(digest(`${logout.iss} ${logout.jti}`));
    // The jti is claimed, as a lock held for as long as ending may take, before the sessions are
    // ended: of copies posted together, one ends them (checked first and recorded after, 20
    // copies at once were each taken, each ending again what the first ended; found by red team).
    // A failure while ending lets the claim go (only its own), so that the provider's retry of the
    // same token ends them; one that Redis would not let go says when the claim lapses.
    const claim = await withStore(() => tryLock(deps.redis, jtiKey, JTI_CLAIM_SECONDS * 1000));
    if (claim === undefined) {
      metrics.backchannelLogouts.inc({ outcome: 'replayed' });
      throw new GatewayError('invalid_request', { description: 'The logout_token was refused: its jti was already used.' });
    }
    let ended: Awaited<ReturnType<typeof registry.endByUser>>;
    try {
      ended = await withStore(() =>
        logout.sid ? registry.endByProviderSession(logout.iss, logout.sid, logout.sub, logout.issuedAt) : registry.endByUser(logout.iss, logout.sub as string),
      );
    } catch (err) {
      if (await claim.release()) throw err;
      throw err instanceof GatewayError ? err.withHeaders({ 'Retry-After': String(JTI_CLAIM_SECONDS) }) : err;
    }
    // Remembered past the token's life by the clock margin: a process behind this one's clock
    // takes the token for that much longer. The sessions are ended whatever this answers: should
    // it fail, the claim still holds the token off for its own while.
    await remember(deps.redis, jtiKey, logout.rememberUntil + MAX_CLOCK_SKEW_SECONDS - Math.floor(Date.now() / 1000)).catch(() => undefined);
    metrics.backchannelLogouts.inc({ outcome: 'ended' });
    logger.info({ event: 'backchannel_logout', by: logout.sid ? 'sid' : 'sub', ended: ended.length }, 'back-channel logout');
    // BCL §2.7: the provider is waiting on this answer; revocation happens after it (and logs
    // its own failures).
    revocations.revokeAll(ended);
    res.status(200).end();
  }

  router.get('/sessions', csrf, deps.sessionMiddleware, list);
  router.delete('/sessions/:id', csrf, deps.sessionMiddleware, end);
  // Server to server: no cookie, no CSRF header; the signed logout token is the credential.
  router.post(
    '/backchannel-logout',
    express.urlencoded({ extended: false, limit: '32kb', parameterLimit: 10 }),
    backchannelLogout,
  );
  return router;
}
