/**
 * RFC 8693 token exchange for the development provider, registered as an extra grant type
 * (oidc-provider has none built in). The dev policy, deliberately small:
 *
 * - the subject token is an access token this provider issued to the requesting client (a JWT
 *   for a resource server, verified and still backed by its grant; or an opaque one it finds),
 *   `subject_token_type` urn:ietf:params:oauth:token-type:access_token: else `invalid_grant` /
 *   `invalid_request`;
 * - `audience` (or `resource`) names a configured resource server: else `invalid_target`;
 * - the new token is a JWT for that resource server, for the same user and grant, its scope
 *   the requested one narrowed to the resource server's scopes (all of them when none is
 *   requested): a requested scope outside them is `invalid_scope`;
 * - a DPoP-bound subject token may be exchanged (the exchange is the client's own call, with its
 *   credentials); the new token is a bearer token.
 */
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JWK } from 'jose';
import { errors, type ResourceServer, type TokenEndpointGrantContext } from 'oidc-provider';
import type { Env } from './env.js';
import { splitScope } from './helpers.js';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const PARAMS = ['scope', 'resource', 'subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'actor_token', 'actor_token_type'];

interface ExchangeParams {
  subject_token?: string;
  subject_token_type?: string;
  requested_token_type?: string;
  audience?: string;
  actor_token?: string;
}

interface Subject {
  accountId: string;
  clientId: string | undefined;
  grantId: string | undefined;
}

export function registerTokenExchange(env: Env): void {
  env.provider.registerGrantType<ExchangeParams>(TOKEN_EXCHANGE, (ctx) => exchange(env, ctx), PARAMS);
}

async function exchange(env: Env, ctx: TokenEndpointGrantContext<ExchangeParams>): Promise<void> {
  const { params, client } = ctx.oidc;
  if (!params.subject_token) throw new errors.InvalidRequest('missing required parameter subject_token');
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest('unsupported subject_token_type');
  if (params.requested_token_type !== undefined && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest('unsupported requested_token_type');
  }
  if (params.actor_token !== undefined) throw new errors.InvalidRequest('delegation (actor_token) is not supported');

  const indicator = params.audience ?? firstResource(params.resource);
  const rsOptions = indicator ? env.options.resourceServers?.[indicator] : undefined;
  if (!indicator || !rsOptions) throw new errors.InvalidTarget('unknown audience');
  const resource = firstResource(params.resource);
  if (resource !== undefined && resource !== indicator) throw new errors.InvalidTarget('resource and audience name different APIs');

  const subject = await findSubject(env, params.subject_token);
  if (!subject || subject.clientId !== client.clientId) throw new errors.InvalidGrant('subject token is not valid for this client');

  const allowed = new Set(splitScope(rsOptions.scope));
  const requested = params.scope === undefined ? [...allowed] : splitScope(params.scope);
  const outside = requested.filter((s) => !allowed.has(s));
  if (outside.length > 0) throw new errors.InvalidScope('requested scope is not available for this audience', outside.join(' '));

  const resourceServer: ResourceServer = {
    scope: rsOptions.scope,
    audience: rsOptions.audience ?? indicator,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'RS256' } },
    ...(rsOptions.accessTokenTTL !== undefined ? { accessTokenTTL: rsOptions.accessTokenTTL } : {}),
  };
  const token = new env.provider.AccessToken({
    accountId: subject.accountId,
    client,
    grantId: subject.grantId ?? '',
    gty: 'token_exchange',
    scope: requested.join(' ') || undefined,
  });
  token.resourceServer = Object.assign(Object.create({ identifier: () => indicator }) as object, resourceServer) as typeof token.resourceServer;
  const value = await token.save();
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: token.expiration,
    ...(token.scope ? { scope: token.scope } : {}),
  };
}

function firstResource(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The access token's user, client and grant, if this provider issued it and it is still good. */
async function findSubject(env: Env, token: string): Promise<Subject | undefined> {
  if (/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token)) {
    try {
      if (decodeProtectedHeader(token).typ !== 'at+jwt') return undefined;
      const { payload } = await jwtVerify(token, createLocalJWKSet(env.jwks as { keys: JWK[] }), {
        issuer: env.options.issuer,
        typ: 'at+jwt',
      });
      const record = typeof payload.jti === 'string' ? env.jwtRecords.get(payload.jti) : undefined;
      if (!record || record.expiresAt <= Date.now() || typeof payload.sub !== 'string') return undefined;
      if (record.grantId !== undefined && !(await env.provider.Grant.find(record.grantId))) return undefined;
      return {
        accountId: payload.sub,
        clientId: typeof payload.client_id === 'string' ? payload.client_id : undefined,
        grantId: record.grantId,
      };
    } catch {
      return undefined;
    }
  }
  const found = await env.provider.AccessToken.find(token);
  if (!found || found.isExpired) return undefined;
  return { accountId: found.accountId, clientId: found.clientId, grantId: found.grantId };
}
