/**
 * The gateway's own endpoints under authPath (SPEC §3): parse → call the domain → respond.
 * Sign-in (login, callback) here; the signed-in session's own (user, logout) in signed-in-routes.ts.
 */
import { randomBytes } from 'node:crypto';
import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { Config } from '../config/load.js';
import { GatewayError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { ProviderHandle } from '../oidc/client.js';
import { describeProviderError, oauthErrorCode } from '../oidc/errors.js';
import { askedOf } from '../oidc/authorization-request.js';
import { completeAuthorization, startAuthorization } from '../oidc/flows.js';
import { digest } from '../redis/keys.js';
import { atMostEvery } from '../clock.js';
import { withStore } from '../redis/errors.js';
import { createLoginCapacity } from './login-capacity.js';
import type { LoginLimiter } from '../redis/rate-limit.js';
import { visibleClaims, type AuthData } from '../session/data.js';
import { userDigest, type EndedSession, type SessionRegistry } from '../session/registry.js';
import type { Transactions } from '../session/transactions.js';
import type { TokenVault } from '../session/vault.js';
import { requireCsrf } from './csrf.js';
import { createLoginBounce } from './login-bounce.js';
import { notASignInStart } from './login-navigation.js';
import { createLoginCookies } from './login-cookies.js';
import { parseLoginQuery } from './login-params.js';
import { oneParam, queryOf } from './query.js';
import { appUrl, isSameOriginRelativePath } from './return-to.js';
import { clearSessionCookie, clearSiteData, createCookieVerifier, destroy, regenerate, save } from './session-cookie.js';
import { createSignedInHandlers } from './signed-in-routes.js';
import type { EndedRevocations } from '../session/ended-revocations.js';
import { clientAddress, compileTrust } from '../proxy/trust.js';
import { generateDpopKey, jwkThumbprint } from '../crypto/dpop.js';
import type { NonceSource } from '../oidc/dpop.js';

export interface AuthRouteDeps {
  config: Config;
  provider: ProviderHandle;
  transactions: Transactions;
  vault: TokenVault;
  registry: SessionRegistry;
  loginLimiter: LoginLimiter;
  sessionMiddleware: RequestHandler;
  logger: Logger;
  metrics: Metrics;
  clock?: () => number;
  /** Shared DPoP nonces (redis/dpop-nonces.ts), for the code exchange's proof. */
  dpopNonces: NonceSource;
  /** The runtime's revocations of ended sessions (journaled; shutdown waits for what is under way). */
  revocations: EndedRevocations;
}

/** A provider clock further off than this is logged (provider_clock_skew). */
const PROVIDER_SKEW_WARN_SECONDS = 60;

const truncate = (value: string | undefined, max: number) => (value ? value.slice(0, max) : undefined);

export function createAuthRouter(deps: AuthRouteDeps): Router {
  const { config, provider, transactions, vault, registry, logger, metrics } = deps;
  const { derived } = config;
  const clock = deps.clock ?? Date.now;
  const csrf = requireCsrf(config.csrf.headerName);
  // Derived from the config once (the bounce's guard cookie, and how a login cookie is cleared).
  const loginCookies = createLoginCookies(config);
  // The login rate limit counts per client, as the trusted hops say (one rule: proxy/trust.ts).
  const trust = compileTrust(config.server.trustProxy);
  const { revocations } = deps;
  const router = Router();
  const verifySessionCookie = createCookieVerifier(derived.sessionCookieName, config.session.secrets);
  const bounceCrossSite = createLoginBounce(config);
  const admitLogin = createLoginCapacity({ config, transactions, metrics, logger, clock });
  const userResources = [
    ...new Set(config.routes.filter((r) => r.resource && (r.auth === 'user' || r.auth === 'user-optional')).map((r) => r.resource as string)),
  ];

  async function login(req: Request, res: Response): Promise<void> {
    // Before anything is spent or set: see login-navigation.ts.
    const refused = notASignInStart(req.headers);
    if (refused) throw new GatewayError('invalid_request', { description: refused });
    const query = parseLoginQuery(queryOf(req));
    const returnTo = query.returnTo ?? '/';
    if (!isSameOriginRelativePath(returnTo)) throw new GatewayError('invalid_return_to');
    // Noted now, ended at the callback: see LoginTransaction.previousSession.
    const previousSession = verifySessionCookie(req.headers.cookie)?.digest;
    // A start from another site comes without the Strict cookie: once more from our own page.
    if (bounceCrossSite(req, res, query, previousSession !== undefined)) return;
    const held = await withStore(() => deps.loginLimiter.hit(clientAddress(req.socket.remoteAddress, req.headers['x-forwarded-for'], trust)));
    await admitLogin(held);
    // Whose it is, while it still is (see LoginTransaction.previousUser). Unread, the sign-in
    // goes on: only whether the callback clears the browser's storage depends on it.
    const previousUser = previousSession === undefined ? undefined : await registry.userOf(previousSession).catch(() => undefined);
    // RFC 9449 §10: a fresh key per sign-in, sealed into the transaction until the callback.
    const dpopKey = derived.dpop ? generateDpopKey() : undefined;
    const request = await startAuthorization(
      provider.get(),
      config.oidc,
      derived.redirectUri,
      userResources,
      query.params,
      dpopKey && jwkThumbprint(dpopKey),
    );
    const asked = askedOf(query.params);
    const binding = randomBytes(32).toString('base64url');
    await withStore(() =>
      transactions.save({
        state: request.state,
        nonce: request.nonce,
        codeVerifier: request.codeVerifier,
        returnTo,
        binding: digest(binding),
        createdAt: clock(),
        ...(previousSession ? { previousSession } : {}),
        ...(previousUser ? { previousUser } : {}),
        ...(asked.acrValues || asked.maxAge !== undefined ? { asked } : {}),
        ...(dpopKey ? { dpopKey } : {}),
      }),
    );
    metrics.loginTransactions.inc({ outcome: 'started' });
    loginCookies.start(req, res, request.state, binding);
    res.redirect(302, request.url);
  }

  function unknownState(): GatewayError {
    metrics.loginTransactions.inc({ outcome: 'invalid_state' });
    return new GatewayError('invalid_state');
  }

  function trimFailed(err: unknown): undefined {
    logger.warn({ event: 'login_trim_failed', reason: describeProviderError(err) }, "could not end the user's oldest sessions past session.maxPerUser");
    return undefined;
  }

  /**
   * The provider's clock as its ID token tells it (issued a moment ago). Logout tokens live
   * minutes: a provider behind by more than that makes every back-channel logout a 400 while
   * sign-ins, whose ID tokens live an hour, work on (found by red team: a silent failure). Said
   * once per 10 min at most.
   */
  const maySaySkew = atMostEvery(600_000, clock);
  function noteProviderClock(issuedAt: number, now: number): void {
    const seconds = Math.round(now / 1000 - issuedAt);
    if (Math.abs(seconds) <= PROVIDER_SKEW_WARN_SECONDS || !maySaySkew()) return;
    logger.warn(
      { event: 'provider_clock_skew', seconds },
      "the provider's clock differs from the gateway's (seconds > 0: the provider is behind); back-channel logout tokens may be refused as expired or not yet valid: check NTP on both",
    );
  }

  function successionFailed(err: unknown): undefined {
    logger.warn({ event: 'login_succession_failed', reason: describeProviderError(err) }, 'a concurrent sign-in of this browser may outlive it');
    return undefined;
  }

  /**
   * Of the sessions a sign-in ended (`replaced`), those of another user: a session of the same
   * user may share the new one's grant (oidc-provider reuses it) and is not revoked, but another
   * user's grant is held by no one now, and is revoked as their logout would have (a shared
   * computer's next user signing in over the last).
   */
  function revokeOtherUsers(ended: readonly EndedSession[]): void {
    revocations.revokeAll(ended.filter((e) => e.otherUser));
  }

  async function callback(req: Request, res: Response): Promise<void> {
    const query = queryOf(req);
    const state = oneParam(query, 'state', 1024);
    // Only the browser holding the state's login cookie may spend its sign-in: a callback
    // without it leaves the transaction untouched.
    const binding = state ? loginCookies.read(req, state) : undefined;
    if (!state || !binding) throw unknownState();
    // RFC 9207 §2.4: the issuer named, and named at all when the provider says it always does
    // (openid-client checks a success again). Judged before the sign-in is spent: an answer made
    // up by a mix-up attacker who learnt the state (an error in particular) is refused, and the
    // provider's own still completes.
    const iss = oneParam(query, 'iss', 2048);
    const { metadata } = provider.get();
    if (iss === undefined ? metadata.authorization_response_iss_parameter_supported === true : iss !== metadata.issuer) {
      throw new GatewayError('invalid_request');
    }
    // Spent (the transaction deleted) before the code is used, a state being good for one callback.
    loginCookies.clear(res, state);
    const tx = await withStore(() => transactions.take(state, digest(binding)));
    if (!tx) throw unknownState();

    const providerError = oneParam(query, 'error', 256);
    if (providerError !== undefined) {
      const code = oauthErrorCode(providerError) ?? 'login_failed';
      metrics.loginTransactions.inc({ outcome: 'provider_error' });
      logger.info({ event: 'login_declined', code }, 'the provider ended the sign-in with an error');
      res.redirect(302, appUrl(derived.publicOrigin, tx.returnTo, { error: code }));
      return;
    }

    const callbackUrl = new URL(derived.redirectUri);
    callbackUrl.search = query.toString();
    let signIn;
    try {
      const dpop = tx.dpopKey ? { key: tx.dpopKey, nonces: deps.dpopNonces } : undefined;
      signIn = await completeAuthorization(provider.get(), config.oidc, callbackUrl, tx, clock, dpop);
    } catch (err) {
      metrics.loginTransactions.inc({ outcome: 'failed' });
      logger.warn({ event: 'login_failed', reason: describeProviderError(err) }, 'sign-in failed');
      throw err;
    }

    // A sign-in while already signed in replaces that session entirely: the one whose cookie
    // came with this request (SameSite=Lax) and the one noted at /auth/login (Strict cookies
    // are not sent on the provider's cross-site redirect back); once saved, also the sessions
    // other sign-ins of this browser made meanwhile (two tabs; see `rivals` below).
    const replaced = new Set<string>();
    if (req.session.auth) replaced.add(digest(req.sessionID));
    if (tx.previousSession) replaced.add(tx.previousSession);
    const { claims } = signIn;
    const signedInAs = userDigest(claims.iss, claims.sub);
    const ended = await withStore(() => registry.replaceAll(replaced, signedInAs));
    revokeOtherUsers(ended);
    // A session this browser held that was another user's, ended here or meanwhile (the
    // provider's back-channel logout as the next user signed in there): what its SPA kept must
    // not be left to this user (found by a red team in Chromium, on a shared computer). A
    // same-user sign-in again (a step-up, a sign-in after a timeout, two tabs) keeps it (found
    // by review: clearing whenever the user was unknown wiped it after every idle timeout).
    let startsClean = ended.some((e) => e.otherUser) || (tx.previousUser !== undefined && tx.previousUser !== signedInAs);
    await withStore(() => regenerate(req)); // new session ID: no fixation
    const sessionDigest = digest(req.sessionID);
    const createdAt = clock();
    noteProviderClock(claims.iat, createdAt);
    const auth: AuthData = {
      handle: randomBytes(16).toString('base64url'),
      sub: claims.sub,
      iss: claims.iss,
      ...(typeof claims.sid === 'string' ? { sid: claims.sid } : {}),
      claims: visibleClaims(claims),
      scopes: signIn.scopes,
      createdAt,
      endsAt: createdAt + config.session.absoluteTimeoutSeconds * 1000,
      ...signIn.authentication,
      ...(req.headers['user-agent'] ? { userAgent: truncate(req.headers['user-agent'], 256) } : {}),
    };
    // Indexed before the session holds anything: a failed register then leaves the new session
    // empty (signed out), never a working session that back-channel logout and /auth/sessions
    // cannot find. Pending until the save: list() never prunes a pending entry without its
    // record, so a concurrent GET /auth/sessions cannot unindex this sign-in. A save that fails
    // leaves a pending entry that the index's readers skip and that expires with the index.
    await withStore(() => registry.register(sessionDigest, auth, 'pending'));
    req.session.auth = auth;
    const tokens = tx.dpopKey ? { ...signIn.tokens, dpopKey: tx.dpopKey } : signIn.tokens;
    req.session.tokens = { v: 1, sealed: vault.seal(sessionDigest, tokens) };
    await withStore(() => save(req));
    // Saved form now that the record exists, so that list() prunes the entry once the session is
    // gone. Should this fail (503), the pending entry still lists and ends the session.
    await withStore(() => registry.register(sessionDigest, auth, 'saved'));
    // A provider's back-channel logout that came while this sign-in was indexed but not saved
    // found no record to remove, and left a note: the session it would have ended is this one,
    // which ends now instead of working on. One that came after the code exchange but before
    // the index entry found nothing at all, and noted the provider session it ended.
    if (await withStore(() => registry.endedDuringSignIn(sessionDigest, auth, claims.iat))) {
      const taken = await withStore(() => registry.end(sessionDigest, 'provider-logout'));
      // Over once taken: the DEL after it is best effort, as at logout.
      await destroy(req).catch(() => undefined);
      clearSessionCookie(res, config);
      await revocations.revokeEnded(sessionDigest, taken?.tokens.sealed, tokens);
      metrics.loginTransactions.inc({ outcome: 'failed' });
      throw new GatewayError('login_required');
    }
    // The sessions this browser's other sign-ins made meanwhile, which this one's cookie
    // overwrites, end too. A failure there does not fail this sign-in.
    const signedIn = { own: tx.binding, inFlight: loginCookies.othersInFlight(req, state), user: signedInAs };
    const superseded = (await registry.supersede(replaced, sessionDigest, signedIn).catch(successionFailed)) ?? [];
    revokeOtherUsers(superseded);
    startsClean ||= superseded.some((e) => e.otherUser);
    // Past session.maxPerUser, the user's oldest sessions end: one account signed in thousands of
    // times made every listing, logout by sub and revocation burst cost as much.
    const trimmed = (await registry.trim(sessionDigest, auth, config.session.maxPerUser).catch(trimFailed)) ?? [];
    revocations.revokeAll(trimmed.filter((t) => t.revokes));
    metrics.loginTransactions.inc({ outcome: 'signed_in' });
    logger.info({ event: 'login', session: auth.handle }, 'signed in');
    if (startsClean) clearSiteData(res);
    res.redirect(302, appUrl(derived.publicOrigin, tx.returnTo));
  }

  router.use((_req, res, next) => {
    res.set('Cache-Control', 'no-store');
    next();
  });
  router.get('/login', login);
  router.get('/callback', deps.sessionMiddleware, callback);
  const { user, logout } = createSignedInHandlers({ config, provider, vault, registry, logger, revocations, clock, verifySessionCookie });
  router.get('/user', csrf, deps.sessionMiddleware, user);
  router.post('/logout', csrf, deps.sessionMiddleware, logout);
  return router;
}
