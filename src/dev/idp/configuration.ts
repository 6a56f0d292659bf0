/**
 * The oidc-provider configuration: clients, scopes, claims, lifetimes, resource servers and the
 * provider-rendered pages (errors, sign-out).
 */
import { randomBytes } from 'node:crypto';
import type { JWK } from 'jose';
import { errors } from 'oidc-provider';
import type { ClientMetadata, Configuration, KoaContextWithOIDC, ResourceServer } from 'oidc-provider';
import { toAccount } from './accounts.js';
import { grantHasOfflineAccess, splitScope } from './helpers.js';
import { messagePage, pageHeaders, renderPage } from './html.js';
import { recordJwt, type JwtRecord } from './jwt-access-tokens.js';
import { ACR } from './second-factor.js';
import type { DevStore } from './store.js';
import type { DevClient, DevIdpOptions, DevTtl, DevUser } from './types.js';

interface ConfigInput {
  options: DevIdpOptions;
  ttl: Required<DevTtl>;
  users: Map<string, DevUser>;
  store: DevStore;
  keys: { keys: JWK[] };
  jwtRecords: Map<string, JwtRecord>;
}

function toClientMetadata(client: DevClient): ClientMetadata {
  const grantTypes = client.grant_types ?? ['authorization_code', 'refresh_token'];
  const responseTypes = client.response_types ?? (grantTypes.includes('authorization_code') ? ['code'] : []);
  const metadata: ClientMetadata = {
    ...client,
    grant_types: grantTypes,
    response_types: responseTypes as ClientMetadata['response_types'],
    redirect_uris: client.redirect_uris ?? [],
    token_endpoint_auth_method: (client.token_endpoint_auth_method ?? 'client_secret_basic') as ClientMetadata['token_endpoint_auth_method'],
  };
  if (client.backchannel_logout_uri) {
    metadata.backchannel_logout_session_required = client.backchannel_logout_session_required ?? true;
  }
  return metadata;
}

function staticScopes(options: DevIdpOptions): string[] {
  // Scopes of a resource server stay resource scopes; declaring them here too would also put
  // them on the OpenID (userinfo) side of every grant.
  const resourceScopes = new Set(Object.values(options.resourceServers ?? {}).flatMap((rs) => splitScope(rs.scope)));
  const extra = Object.keys(options.scopes ?? {}).filter((s) => !resourceScopes.has(s));
  return [...new Set(['openid', 'offline_access', 'profile', 'email', ...extra])];
}

function resourceServerInfo(options: DevIdpOptions, indicator: string): ResourceServer {
  const rs = options.resourceServers?.[indicator];
  if (!rs) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
  return {
    scope: rs.scope,
    audience: rs.audience ?? indicator,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'RS256' } },
    ...(rs.accessTokenTTL !== undefined ? { accessTokenTTL: rs.accessTokenTTL } : {}),
  };
}

function pickDefaultResource(options: DevIdpOptions, oneOf: readonly string[] | undefined): string | undefined {
  if (!oneOf) return options.defaultResource;
  // Several granted resources and none named: prefer the configured one, else the first, so a
  // refresh without `resource` never fails with invalid_target.
  if (options.defaultResource && oneOf.includes(options.defaultResource)) return options.defaultResource;
  return oneOf[0];
}

export function buildConfiguration(input: ConfigInput): Configuration {
  const { options, ttl, users } = input;
  return {
    clients: options.clients.map(toClientMetadata),
    adapter: (model: string) => input.store.adapterFor(model),
    jwks: input.keys as Configuration['jwks'],
    cookies: { keys: [randomBytes(32).toString('base64url'), randomBytes(32).toString('base64url')] },
    findAccount: (_ctx, sub) => {
      const user = users.get(sub);
      return user ? toAccount(user) : undefined;
    },
    claims: {
      openid: options.acrInEveryIdToken ? ['sub', 'acr', 'auth_time'] : ['sub'],
      profile: ['name', 'given_name', 'family_name', 'preferred_username', 'updated_at'],
      email: ['email', 'email_verified'],
    },
    scopes: staticScopes(options),
    subjectTypes: ['public'],
    // Step-up (second-factor.ts): a password yields the first, a password and a code the second.
    acrValues: [ACR.password, ACR.mfa],
    responseTypes: ['code'],
    pkce: { required: () => true },
    clockTolerance: options.clockTolerance ?? 5,
    // ID tokens carry the profile and email claims even when the access token is for the
    // userinfo endpoint: the gateway reads who signed in from the ID token.
    conformIdTokenClaims: false,
    rotateRefreshToken: options.rotateRefreshToken ?? true,
    // oidc-provider only keeps offline_access in an authorization request that also says
    // prompt=consent (see installProviderMiddleware); a grant that already holds it counts.
    issueRefreshToken: (ctx, client, code) =>
      client.grantTypeAllowed('refresh_token') && (code.scopes.has('offline_access') || grantHasOfflineAccess(ctx.oidc.entities.Grant)),
    expiresWithSession: (ctx, code) => !(code.scopes.has('offline_access') || grantHasOfflineAccess(ctx.oidc.entities.Grant)),
    ttl: {
      AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? ttl.AccessToken,
      ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? ttl.ClientCredentials,
      AuthorizationCode: ttl.AuthorizationCode,
      IdToken: ttl.IdToken,
      RefreshToken: ttl.RefreshToken,
      Session: ttl.Session,
      Grant: ttl.Grant,
      Interaction: ttl.Interaction,
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    formats: { customizers: { jwt: (_ctx, token, parts) => recordJwt(input.jwtRecords, (token as { grantId?: string }).grantId, parts.payload) } },
    renderError: (ctx, out) => {
      const page = messagePage('Something went wrong', `${out.error}: ${out.error_description ?? ''}`);
      ctx.set(pageHeaders(page.nonce));
      ctx.body = page.html;
    },
    // The provider only ever calls configured loopback clients (back-channel logout); its
    // default fetch refuses special-use addresses such as 127.0.0.1 (SSRF protection).
    fetch: (url, init) => {
      const { dispatcher: _ignored, ...rest } = (init ?? {}) as RequestInit & { dispatcher?: unknown };
      return globalThis.fetch(url, rest);
    },
    features: {
      devInteractions: { enabled: false },
      revocation: { enabled: true, allowedPolicy: (_ctx, client, token) => token.clientId === client.clientId },
      introspection: { enabled: true, allowedPolicy: (_ctx, client, token) => token.clientId === client.clientId },
      backchannelLogout: { enabled: true },
      // DPoP-bound tokens (cnf.jkt) for requests with a proof; `dpop_jkt` at authorization.
      dPoP: {
        enabled: true,
        ...(options.dpopNonces ? { nonceSecret: randomBytes(32), requireNonce: () => true } : {}),
      },
      clientCredentials: { enabled: true },
      userinfo: { enabled: true },
      rpInitiatedLogout: { enabled: true, logoutSource, postLogoutSuccessSource },
      // Step-up: an essential acr in the claims parameter makes the login prompt come back.
      claimsParameter: { enabled: true },
      pushedAuthorizationRequests: {
        enabled: (options.pushedAuthorizationRequests ?? 'off') !== 'off',
        requirePushedAuthorizationRequests: options.pushedAuthorizationRequests === 'required',
      },
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo: (_ctx, indicator) => resourceServerInfo(options, indicator),
        defaultResource: (_ctx, _client, oneOf) => pickDefaultResource(options, oneOf),
        // Lets a refresh (or code exchange) without `resource` keep receiving a token for the
        // granted API instead of a userinfo-only token.
        useGrantedResource: () => true,
      },
    },
  };
}

async function logoutSource(ctx: KoaContextWithOIDC, form: string): Promise<void> {
  const page = renderPage(
    'Sign out',
    `<h1>Sign out of the development provider?</h1>${form}
<div class="actions"><button autofocus type="submit" form="op.logoutForm" name="logout" value="yes">Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button></div>`,
  );
  ctx.set(pageHeaders(page.nonce));
  ctx.body = page.html;
}

async function postLogoutSuccessSource(ctx: KoaContextWithOIDC): Promise<void> {
  const page = messagePage('Signed out', 'You are signed out of the development provider.');
  ctx.set(pageHeaders(page.nonce));
  ctx.body = page.html;
}
