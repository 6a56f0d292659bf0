/**
 * Which credential a proxied call carries, by the route's `auth` mode (SPEC §4). No Express
 * here: the HTTP layer passes in the session it loaded.
 */
import type { Config } from '../config/load.js';
import { GatewayError } from '../errors.js';
import type { ProviderHandle } from '../oidc/client.js';
import { refreshTokens } from '../oidc/flows.js';
import type { AuthData, SealedTokens } from '../session/data.js';
import type { RefreshCoordinator } from '../session/refresh.js';
import { expiresWithin, nowSeconds, type VersionedTokens } from '../session/tokens.js';
import type { TokenVault } from '../session/vault.js';
import type { CompiledRoute } from './routes.js';
import type { Credential } from './upstream.js';

/** The signed-in part of a loaded session, as the HTTP layer found it. */
export interface LoadedSession {
  digest: string;
  auth: AuthData | undefined;
  tokens: SealedTokens | undefined;
}

export interface CredentialDeps {
  config: Config;
  vault: TokenVault;
  refresher: RefreshCoordinator;
  provider: ProviderHandle;
  clock: () => number;
  clientToken?: (route: CompiledRoute) => Promise<string>;
}

export interface CredentialOptions {
  /** Refresh even if the token looks valid (the upstream said invalid_token). */
  forceRefresh?: boolean;
}

export function missingScopes(route: CompiledRoute, granted: readonly string[]): string[] {
  return route.scopes.filter((s) => !granted.includes(s));
}

export function createCredentialResolver(deps: CredentialDeps) {
  const { config, vault, refresher, provider } = deps;

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
    const stale = (v: VersionedTokens) =>
      v.tokens !== undefined && expiresWithin(v.tokens, config.tokens.refreshSkewSeconds, nowSeconds(deps.clock));
    if (options.forceRefresh || stale(current)) {
      current = await refresher.refresh(session.digest, current, (t) => refreshTokens(provider.get(), t, auth.sub, {}, deps.clock));
    }
    if (!current.tokens) throw new GatewayError('login_required');
    return current.tokens.accessToken;
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
      case 'client': {
        if (!deps.clientToken) throw new GatewayError('server_error');
        return { header: 'authorization', value: `Bearer ${await deps.clientToken(route)}` };
      }
    }
  };
}

export type CredentialResolver = ReturnType<typeof createCredentialResolver>;

/** Does this route's auth mode read the user's session? */
export function needsSession(route: CompiledRoute): boolean {
  return route.auth === 'user' || route.auth === 'user-optional' || route.requireSession;
}
