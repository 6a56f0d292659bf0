/**
 * Which credential a proxied call carries, by the route's `auth` mode (SPEC §4). No Express
 * here: the HTTP layer passes in the session it loaded.
 *
 * After an upstream refused a token (401 invalid_token), `renew` gives the credential to retry
 * with: a token newer than the refused one if another request already got it, else a renewal
 * of the refused one if the refusal cooldown allows it (refusal-cooldown.ts), else 'pass' (the
 * upstream's 401 goes to the browser as it is). So an upstream that keeps refusing costs the
 * provider one grant per cooldown, not one per request.
 */
import type { Config } from '../config/load.js';
import { GatewayError } from '../errors.js';
import type { ProviderHandle } from '../oidc/client.js';
import { exchangeToken, refreshTokens } from '../oidc/grants.js';
import type { TokenDpop } from '../oidc/dpop.js';
import type { DpopNonces } from '../redis/dpop-nonces.js';
import type { AuthData, SealedTokens } from '../session/data.js';
import { sessionGone } from '../session/gone.js';
import type { RefreshCoordinator, RefreshFn } from '../session/refresh.js';
import { expiresWithin, hasExpired, nowSeconds, type Expiring, type ResourceToken, type TokenSet, type VersionedTokens } from '../session/tokens.js';
import type { TokenVault } from '../session/vault.js';
import type { ClientTokens } from './client-token.js';
import type { RefusalCooldown } from './refusal-cooldown.js';
import type { CompiledRoute } from './routes.js';
import type { Credential } from './upstream.js';
import type { DpopProofs } from './dpop-proofs.js';
import { exchangedToken, exchangeFor, rememberRefusals } from './token-exchange.js';
import { createGrantBackoff } from './grant-backoff.js';
import { requireScopes } from './route-scopes.js';

/** The signed-in part of a loaded session, as the HTTP layer found it. */
export interface LoadedSession {
  digest: string;
  auth: Readonly<AuthData> | undefined;
  tokens: Readonly<SealedTokens> | undefined;
  /**
   * No record at all (never was, or ended: a logout elsewhere, a new sign-in of the same
   * browser, a timeout), as against one that reads but holds no usable sign-in.
   */
  gone?: boolean;
}

export interface CredentialDeps {
  config: Config;
  vault: TokenVault;
  refresher: RefreshCoordinator;
  provider: ProviderHandle;
  clock: () => number;
  clientTokens: ClientTokens;
  /** Bounds forced renewals of refused tokens (refusal-cooldown.ts). */
  refusals: RefusalCooldown;
  /** Shared DPoP nonces (token requests of DPoP sessions). */
  dpopNonces: DpopNonces;
  /** Proofs for DPoP routes. */
  dpopProofs: DpopProofs;
}

/** Retry without a new credential: the upstream's answer is passed through. */
export const PASS = 'pass';

/** The access token the upstream refused, and the cooldown that bounds renewing it. */
interface Refusal {
  token: string;
  cooldown: RefusalCooldown;
}

/**
 * A refresh that another request's (e.g. another resource's) refresh overtook is retried this
 * often; a renewal may also first catch up with the refresh that produced the refused token.
 */
const MAX_REFRESH_ROUNDS = 3;

/** The token of an `authorization: <scheme> <token>` credential. */
function tokenOf(credential: Credential): string {
  return credential.value.slice(credential.value.indexOf(' ') + 1);
}

/** The route, typed as one with a token exchange when it has one (no copy). */
const withExchange = (route: CompiledRoute) =>
  route.tokenExchange ? (route as CompiledRoute & { tokenExchange: NonNullable<CompiledRoute['tokenExchange']> }) : undefined;

/** The token a route sends, from the session's set: its exchanged token, its resource's, or the sign-in token. */
function routeToken(t: TokenSet, route: CompiledRoute): (Expiring & { accessToken: string }) | undefined {
  const exchanged = withExchange(route);
  if (exchanged) return exchangedToken(t, exchanged);
  return route.resource ? t.resources?.[route.resource] : t;
}

/** The refusal cooldown is per session and token kind: the sign-in token, a resource's, a route's exchanged one. */
const cooldownKey = (route: CompiledRoute): string | undefined => (route.tokenExchange ? `exchange ${route.path}` : route.resource);

/** A DPoP route called by a session signed in before DPoP was switched on (no key to prove with). */
const notBound = () => new GatewayError('login_required', { description: 'This API needs a sender-constrained (DPoP) session; sign in again.' });

export function createCredentialResolver(deps: CredentialDeps) {
  const { config, vault, refresher, provider } = deps;
  const skew = config.tokens.refreshSkewSeconds;
  /** Token requests of a DPoP session carry a proof of its key (RFC 9449 §5). */
  const dpopOf = (t: TokenSet): TokenDpop | undefined => (t.dpopKey ? { key: t.dpopKey, nonces: deps.dpopNonces } : undefined);
  const exchange = rememberRefusals((subject, request) => exchangeToken(provider.get(), subject, request, deps.clock), deps.clock);
  /**
   * Refresh-token grants the provider failed (5xx, 429, a DPoP nonce it keeps asking for, an
   * answer that is not a token answer), per session and renewal: not asked again by this process
   * for 1 s, doubling to 30 s (grant-backoff.ts). Each call of a signed-in script on an expired
   * session was one grant (two with DPoP's nonce retry) at a provider already failing. A refusal
   * (invalid_grant) ends the session instead; exchanges have their own (rememberRefusals).
   */
  const failedRefreshes = createGrantBackoff<GatewayError>(deps.clock);

  /** RFC 8707: a token for one resource, from the refresh token, merged into the set. */
  function refreshForResource(resource: string, sub: string): RefreshFn {
    return async (current: TokenSet) => {
      const got = await refreshTokens(provider.get(), current, sub, { resource }, deps.clock, dpopOf(current));
      const token: ResourceToken = { accessToken: got.accessToken, ...(got.expiresAt ? { expiresAt: got.expiresAt, lifetime: got.lifetime } : {}) };
      return {
        ...current,
        // A rotated refresh token replaces the old one for the whole set.
        ...(got.refreshToken ? { refreshToken: got.refreshToken } : {}),
        resources: { ...current.resources, [resource]: token },
      };
    };
  }

  /** The sign-in token's refresh keeps the per-resource tokens; a resource's keeps the rest. */
  function refreshFor(resource: string | undefined, sub: string): RefreshFn {
    if (resource) return refreshForResource(resource, sub);
    // What the sign-in token's refresh does not touch is carried on: per-resource and exchanged
    // tokens, and the DPoP key the new token is bound to.
    return (t) =>
      refreshTokens(provider.get(), t, sub, {}, deps.clock, dpopOf(t)).then((next) => ({
        ...next,
        ...(t.resources ? { resources: t.resources } : {}),
        ...(t.exchanged ? { exchanged: t.exchanged } : {}),
        ...(t.dpopKey ? { dpopKey: t.dpopKey } : {}),
      }));
  }

  /**
   * How a route's token is renewed: the sign-in or resource token by refresh; an exchanged one by
   * exchange, after refreshing the session's own first when the subject token is about to expire
   * (proxy/token-exchange.ts). Built only when a renewal is due, never on a steady-state call.
   */
  function renewal(t: TokenSet, route: CompiledRoute, sub: string): { fn: RefreshFn; needsRefreshToken: boolean; renewal: string } {
    const exchanged = withExchange(route);
    if (!exchanged) return { fn: refreshFor(route.resource, sub), needsRefreshToken: true, renewal: route.resource ? `resource ${route.resource}` : 'refresh' };
    if (expiresWithin(t, skew, nowSeconds(deps.clock))) return { fn: refreshFor(undefined, sub), needsRefreshToken: true, renewal: 'refresh' };
    return { fn: exchangeFor(exchanged, exchange, deps.clock), needsRefreshToken: false, renewal: `exchange ${route.path}` };
  }

  /** The session's token for the route; with `refused`, one newer than it, or undefined: pass. */
  function userAccessToken(session: LoadedSession, route: CompiledRoute): Promise<string>;
  function userAccessToken(session: LoadedSession, route: CompiledRoute, refused: Refusal): Promise<string | undefined>;
  async function userAccessToken(session: LoadedSession, route: CompiledRoute, refused?: Refusal): Promise<string | undefined> {
    const { auth, tokens } = session;
    if (session.gone) throw sessionGone();
    if (!auth || !tokens?.sealed) throw new GatewayError('login_required');
    // Sealed with a key this process does not hold: refused as ended elsewhere (openHere).
    let current: VersionedTokens = { version: tokens.v, tokens: vault.openHere(session.digest, tokens.sealed) };
    // Tampered: signed out.
    if (!current.tokens) throw new GatewayError('login_required');
    requireScopes(route, auth, current.tokens);
    // Before any refresh or exchange: a session that cannot call this route gains nothing from one.
    if (route.dpop && !current.tokens.dpopKey) throw notBound();

    // The cooldown is claimed once per renewal: a second round (an exchange route whose first
    // round refreshed the session's own token) must not find its own claim and give up.
    let claimed = false;
    // Set when this call's own renewal of the refused token asked the provider (its RefreshFn ran).
    let renewedRefused = false;
    // A token just renewed is not due again in the same call: it is renewed at most half its
    // lifetime before it expires (session/tokens.ts renewalMargin), and it lives a second at
    // least (a shorter expires_in is read as not stated: oidc/granted.ts granted).
    for (let round = 0; round < MAX_REFRESH_ROUNDS; round++) {
      const token = current.tokens ? routeToken(current.tokens, route) : undefined;
      const isRefused = token !== undefined && token.accessToken === refused?.token;
      if (token && !isRefused && !expiresWithin(token, skew, nowSeconds(deps.clock))) return token.accessToken;
      // The refused token renewed here, and the provider handed it back (as some do while it is
      // valid): another round would only ask again. Another renewal that moved the set meanwhile
      // (another resource's; a refresh before an exchange) leaves this one still to come.
      if (isRefused && renewedRefused) return undefined;
      // The refused token is current as of this version. The coordinator refreshes only if the
      // record is still at it (else it returns the newer set, no provider call); the cooldown
      // makes that at most one version per interval, so a new token the upstream refuses too
      // is not refreshed again on the next call.
      if (isRefused && !claimed) {
        if (!(await refused.cooldown.session(session.digest, cooldownKey(route), current.version))) return undefined;
        claimed = true;
      }
      const next = renewal(current.tokens as TokenSet, route, auth.sub);
      // Due, not expired, not refused: it serves while another process renews it (or one that
      // died holds the lock until it lapses), rather than this call waiting for that renewal.
      const usable = token !== undefined && !isRefused ? token : undefined;
      const stillUsable = usable === undefined ? undefined : () => !hasExpired(usable, nowSeconds(deps.clock));
      const seenVersion = current.version;
      // The provider failed this renewal (now, or within its backoff): the token it was to renew
      // serves on while it lasts, as an outage at the provider must not fail calls it can make.
      const servedOr = (err: GatewayError): string => {
        if (stillUsable?.()) return (usable as ResourceToken).accessToken;
        throw err;
      };
      const failing = next.needsRefreshToken ? `${session.digest} ${next.renewal}` : undefined;
      const failed = failing === undefined ? undefined : failedRefreshes.pending(failing);
      if (failed !== undefined) return servedOr(failed.error);
      // The route's own token (an exchange route's first round may refresh the session's first).
      const own = isRefused && (!withExchange(route) || !next.needsRefreshToken);
      let asked = false;
      const fn: RefreshFn = (t) => {
        asked = true;
        if (own) renewedRefused = true;
        return next.fn(t);
      };
      try {
        current = await refresher.refresh(session.digest, current, fn, {
          handle: auth.handle,
          needsRefreshToken: next.needsRefreshToken,
          renewal: next.renewal,
          ...(stillUsable ? { stillUsable } : {}),
        });
      } catch (err) {
        // Only the provider's failure of this call's own renewal (a refusal ended the session).
        if (!asked || !(err instanceof GatewayError) || err.code !== 'token_refresh_failed') throw err;
        if (failing !== undefined) failedRefreshes.failed(failing, err);
        return servedOr(err);
      }
      if (failing !== undefined) failedRefreshes.succeeded(failing);
      // Checked again: a caller that joined another's renewal was answered by that one's check.
      if (usable !== undefined && current.version === seenVersion && !hasExpired(usable, nowSeconds(deps.clock))) return usable.accessToken;
      if (current.tokens) requireScopes(route, auth, current.tokens);
    }
    const token = current.tokens ? routeToken(current.tokens, route) : undefined;
    if (!token) throw new GatewayError('token_refresh_failed');
    return token.accessToken === refused?.token ? undefined : token.accessToken;
  }

  const bearer = (token: string): Credential => ({ header: 'authorization', value: `Bearer ${token}` });

  /**
   * RFC 9449 §7.1: `Authorization: DPoP` and a proof per attempt. A session without a DPoP key
   * (signed in before DPoP was switched on) cannot call a DPoP route: 401 login_required, so
   * that the SPA signs in again and gets a bound session (fail closed: never a bearer token
   * to an upstream configured for sender-constrained ones).
   */
  function userCredential(route: CompiledRoute, session: LoadedSession, token: string): Credential | Promise<Credential> {
    // A bearer route pays nothing for DPoP: no extra await, no lookup.
    return route.dpop ? dpopCredential(route, session, token) : bearer(token);
  }

  async function dpopCredential(route: CompiledRoute, session: LoadedSession, token: string): Promise<Credential> {
    // The key is carried on through refreshes, so the set read with the session holds it
    // (userAccessToken has refused a session without one already).
    const sealed = session.tokens?.sealed;
    const key = sealed ? vault.open(session.digest, sealed)?.dpopKey : undefined;
    if (!key) throw notBound();
    return { header: 'authorization', value: `DPoP ${token}`, dpop: await deps.dpopProofs.attach(key, token, route.targetOrigin) };
  }
  const clientRequest = (route: CompiledRoute) => ({ scopes: route.scopes, ...(route.resource ? { resource: route.resource } : {}) });

  /** The credential for `route`, or undefined to forward without one. */
  async function resolveCredential(route: CompiledRoute, session: LoadedSession | undefined): Promise<Credential | undefined> {
    switch (route.auth) {
      case 'none':
        return undefined;
      case 'user':
        if (!session) throw new GatewayError('login_required');
        return userCredential(route, session, await userAccessToken(session, route));
      case 'user-optional':
        if (!session?.auth || !session.tokens?.sealed) return undefined;
        return userCredential(route, session, await userAccessToken(session, route));
      case 'apiKey':
        return route.apiKey ? { header: route.apiKey.header.toLowerCase(), value: route.apiKey.value } : undefined;
      case 'client':
        return bearer(await deps.clientTokens.get(clientRequest(route)));
    }
  }

  /** The credential to retry with after the upstream refused `refused` (401 invalid_token), or PASS. */
  async function renew(
    route: CompiledRoute,
    session: LoadedSession | undefined,
    refused: Credential,
  ): Promise<Credential | typeof PASS> {
    const token = tokenOf(refused);
    switch (route.auth) {
      case 'user':
      case 'user-optional': {
        if (!session) throw new GatewayError('login_required');
        const next = await userAccessToken(session, route, { token, cooldown: deps.refusals });
        return next === undefined ? PASS : userCredential(route, session, next);
      }
      case 'client': {
        const next = await deps.clientTokens.renew(clientRequest(route), token);
        return next === undefined ? PASS : bearer(next);
      }
      default:
        // An API key or no credential: nothing the gateway could renew.
        return PASS;
    }
  }

  return Object.assign(resolveCredential, { renew });
}

export type CredentialResolver = ReturnType<typeof createCredentialResolver>;
