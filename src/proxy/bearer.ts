/**
 * Which credential a proxied call carries, by the route's `auth` mode (SPEC §4). No Express
 * here: the HTTP layer passes in the session it loaded.
 */
import type { Config } from '../config/load.js';
import { GatewayError } from '../errors.js';
import type { ProviderHandle } from '../oidc/client.js';
import { refreshTokens } from '../oidc/flows.js';
import type { AuthData, SealedTokens } from '../session/data.js';
import type { RefreshCoordinator, RefreshFn } from '../session/refresh.js';
import { expiresWithin, nowSeconds, type ResourceToken, type TokenSet, type VersionedTokens } from '../session/tokens.js';
import type { TokenVault } from '../session/vault.js';
import type { ClientTokens } from './client-token.js';
import type { CompiledRoute } from './routes.js';
import type { Credential } from './upstream.js';

/** The signed-in part of a loaded session, as the HTTP layer found it. */
export interface LoadedSession {
  digest: string;
  auth: Readonly<AuthData> | undefined;
  tokens: Readonly<SealedTokens> | undefined;
}

export interface CredentialDeps {
  config: Config;
  vault: TokenVault;
  refresher: RefreshCoordinator;
  provider: ProviderHandle;
  clock: () => number;
  clientTokens: ClientTokens;
}

export interface CredentialOptions {
  /** Refresh even if the token looks valid (the upstream said invalid_token). */
  forceRefresh?: boolean;
}

/** A refresh that another request's (e.g. another resource's) refresh overtook is retried this often. */
const MAX_REFRESH_ROUNDS = 3;

export function missingScopes(route: CompiledRoute, granted: readonly string[]): string[] {
  return route.scopes.filter((s) => !granted.includes(s));
}

export function createCredentialResolver(deps: CredentialDeps) {
  const { config, vault, refresher, provider } = deps;
  const skew = config.tokens.refreshSkewSeconds;

  /** RFC 8707: a token for one resource, from the refresh token, merged into the set. */
  function refreshForResource(resource: string, sub: string): RefreshFn {
    return async (current: TokenSet) => {
      const got = await refreshTokens(provider.get(), current, sub, { resource }, deps.clock);
      const token: ResourceToken = { accessToken: got.accessToken, ...(got.expiresAt ? { expiresAt: got.expiresAt } : {}) };
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
    return (t) =>
      refreshTokens(provider.get(), t, sub, {}, deps.clock).then((next) => ({ ...next, ...(t.resources ? { resources: t.resources } : {}) }));
  }

  async function userAccessToken(session: LoadedSession, route: CompiledRoute, options: CredentialOptions): Promise<string> {
    const { auth, tokens } = session;
    if (!auth || !tokens?.sealed) throw new GatewayError('login_required');
    const missing = missingScopes(route, auth.scopes);
    if (missing.length > 0) {
      throw new GatewayError('insufficient_scope', {
        description: `This API requires the scope${missing.length > 1 ? 's' : ''} ${missing.join(', ')}, which this session was not granted.`,
      });
    }
    let current: VersionedTokens = { version: tokens.v, tokens: vault.open(session.digest, tokens.sealed) };
    // Unopenable (tampered, or sealed with a key no longer configured): treat as signed out.
    if (!current.tokens) throw new GatewayError('login_required');

    const resource = route.resource;
    const pick = (t: TokenSet): { accessToken: string; expiresAt?: number } | undefined => (resource ? t.resources?.[resource] : t);

    let force = options.forceRefresh ?? false;
    for (let round = 0; round < MAX_REFRESH_ROUNDS; round++) {
      const token = current.tokens ? pick(current.tokens) : undefined;
      if (token && !force && !expiresWithin(token, skew, nowSeconds(deps.clock))) return token.accessToken;
      current = await refresher.refresh(session.digest, current, refreshFor(resource, auth.sub), { handle: auth.handle });
      force = false;
    }
    const token = current.tokens ? pick(current.tokens) : undefined;
    if (!token) throw new GatewayError('token_refresh_failed');
    return token.accessToken;
  }

  /** The credential for `route`, or undefined to forward without one. */
  return async function resolveCredential(
    route: CompiledRoute,
    session: LoadedSession | undefined,
    options: CredentialOptions = {},
  ): Promise<Credential | undefined> {
    switch (route.auth) {
      case 'none':
        return undefined;
      case 'user':
        if (!session) throw new GatewayError('login_required');
        return { header: 'authorization', value: `Bearer ${await userAccessToken(session, route, options)}` };
      case 'user-optional':
        if (!session?.auth || !session.tokens?.sealed) return undefined;
        return { header: 'authorization', value: `Bearer ${await userAccessToken(session, route, options)}` };
      case 'apiKey':
        return route.apiKey ? { header: route.apiKey.header.toLowerCase(), value: route.apiKey.value } : undefined;
      case 'client':
        return {
          header: 'authorization',
          value: `Bearer ${await deps.clientTokens({
            scopes: route.scopes,
            ...(route.resource ? { resource: route.resource } : {}),
            ...(options.forceRefresh ? { force: true } : {}),
          })}`,
        };
    }
  };
}

export type CredentialResolver = ReturnType<typeof createCredentialResolver>;

/** Does this route's auth mode read the user's session? */
export function needsSession(route: CompiledRoute): boolean {
  return route.auth === 'user' || route.auth === 'user-optional' || route.requireSession;
}
