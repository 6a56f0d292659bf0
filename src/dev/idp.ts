/**
 * Development OpenID provider (oidc-provider v9) for the demo (`npm start`) and the tests.
 *
 * Everything lives in memory and per instance: keys, cookie keys, accounts, grants and the
 * account page's own sign-in sessions. It is deliberately permissive about loopback (http
 * issuer, back-channel logout to 127.0.0.1) and must never face real users.
 */
import Provider from 'oidc-provider';
import { defaultUsers } from './idp/accounts.js';
import { connectedApplications, revokeGrantsFor } from './idp/account.js';
import { buildConfiguration } from './idp/configuration.js';
import type { Env } from './idp/env.js';
import { splitScope } from './idp/helpers.js';
import { listenOn } from './idp/http.js';
import { jwtAccessTokenActive, type JwtRecord } from './idp/jwt-access-tokens.js';
import { signingKeys } from './idp/keys.js';
import { installProviderMiddleware, reportProviderEvents } from './idp/provider-events.js';
import { failRequest, route } from './idp/routes.js';
import { DevStore } from './idp/store.js';
import { registerTokenExchange } from './idp/token-exchange.js';
import { DEFAULT_TTL } from './idp/ttl.js';
import type { DevIdp, DevIdpCounters, DevIdpOptions } from './idp/types.js';

export type { Provider };
export type {
  ConnectedApplication,
  DevClient,
  DevIdp,
  DevIdpCounters,
  DevIdpOptions,
  DevIdpServer,
  DevResourceServer,
  DevTtl,
  DevUser,
} from './idp/types.js';
export { escapeHtml } from './idp/html.js';
export { devTtlFromEnv } from './idp/ttl.js';

export async function createDevIdp(options: DevIdpOptions): Promise<DevIdp> {
  const ttl = { ...DEFAULT_TTL, ...options.ttl };
  const users = new Map((options.users ?? defaultUsers()).map((u) => [u.id, u]));
  const keys = await signingKeys(options.jwks);
  const store = new DevStore(options.clockTolerance ?? 5);
  const jwtRecords = new Map<string, JwtRecord>();
  const counters: DevIdpCounters = { grants: {}, grantFailures: {}, revocations: 0, revokedJwtIds: [], introspections: 0, backchannelLogouts: 0 };
  const log = options.logger ?? (() => undefined);

  const provider = new Provider(options.issuer, buildConfiguration({ options, ttl, users, store, keys: keys.privateJwks, jwtRecords }));
  const env: Env = {
    options,
    ttl,
    users,
    store,
    provider,
    counters,
    jwks: keys.jwks,
    scopeWords: { ...collectResourceScopeWords(options), ...options.scopes },
    accountSessions: new Map(),
    jwtRecords,
    secondFactors: new Map(),
    log,
  };
  installProviderMiddleware(env);
  registerTokenExchange(env);
  reportProviderEvents(env);

  const providerCallback = provider.callback();
  const handler: DevIdp['handler'] = (req, res) => {
    route(env, req, res, providerCallback).catch((err: unknown) => failRequest(env, res, err));
  };

  return {
    issuer: options.issuer,
    provider,
    handler,
    counters,
    jwks: keys.jwks,
    privateJwks: keys.privateJwks,
    listen: (port, host = '127.0.0.1') => listenOn(handler, port, host),
    revokeGrantsFor: (accountId, clientId) => revokeGrantsFor(env, accountId, clientId),
    connectedApplications: (accountId) => connectedApplications(env, accountId),
    jwtAccessTokenActive: (token) => jwtAccessTokenActive(env, token),
  };
}

function collectResourceScopeWords(options: DevIdpOptions): Record<string, string> {
  const words: Record<string, string> = {};
  for (const [resource, rs] of Object.entries(options.resourceServers ?? {})) {
    for (const scope of splitScope(rs.scope)) words[scope] = `Use the permission “${scope}” at ${resource}`;
  }
  return words;
}
