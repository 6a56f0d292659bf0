/**
 * Provider middleware (offline-access consent, see offline-access.ts; request counters) and the
 * events it logs.
 */
import { decodeJwt } from 'jose';
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { Env } from './env.js';
import { errorMessage, increment } from './helpers.js';
import { addConsentToPush, askConsentForOfflineAccess, AUTHORIZATION_PATH, PAR_PATH } from './offline-access.js';
import type { DevIdpCounters } from './types.js';


export function installProviderMiddleware(env: Env): void {
  const { provider } = env;
  provider.use(async (ctx, next) => {
    if (ctx.method === 'GET' && ctx.path === AUTHORIZATION_PATH) await askConsentForOfflineAccess(env, ctx);
    await next();
    if (ctx.method === 'POST' && ctx.path === PAR_PATH) await addConsentToPush(ctx as unknown as KoaContextWithOIDC);
    countRequest(env.counters, ctx as unknown as KoaContextWithOIDC);
  });
}

function countRequest(counters: DevIdpCounters, ctx: KoaContextWithOIDC): void {
  const route = (ctx as { oidc?: { route?: string } }).oidc?.route;
  if (route === 'token') {
    const grantType = tokenRequestGrantType(ctx);
    increment(counters.grants, grantType);
    if (ctx.status >= 400) increment(counters.grantFailures, grantType);
  } else if (route === 'revocation') {
    counters.revocations += 1;
    const jti = jwtId(ctx.oidc.params?.token);
    if (jti !== undefined) {
      counters.revokedJwtIds.push(jti);
      if (counters.revokedJwtIds.length > 1000) counters.revokedJwtIds.shift();
    }
  } else if (route === 'introspection') {
    counters.introspections += 1;
  }
}

/** The `jti` of a JWT's payload (not verified: a counter for tests, not a decision), else undefined. */
function jwtId(token: unknown): string | undefined {
  if (typeof token !== 'string' || token.length > 16_384) return undefined;
  try {
    const jti = decodeJwt(token).jti;
    return typeof jti === 'string' ? jti : undefined;
  } catch {
    return undefined;
  }
}

function tokenRequestGrantType(ctx: KoaContextWithOIDC): string {
  const value = ctx.oidc.params?.grant_type ?? ctx.oidc.body?.grant_type;
  return typeof value === 'string' ? value : 'unknown';
}

function clientIdOf(ctx: KoaContextWithOIDC | undefined): string {
  return ctx?.oidc?.client?.clientId ?? '-';
}

export function reportProviderEvents(env: Env): void {
  const { provider, log, counters } = env;
  provider.on('grant.success', (ctx: KoaContextWithOIDC) => log(`grant.success ${tokenRequestGrantType(ctx)} client=${clientIdOf(ctx)}`));
  provider.on('grant.error', (ctx: KoaContextWithOIDC, err: unknown) => log(`grant.error ${tokenRequestGrantType(ctx)} client=${clientIdOf(ctx)} ${errorMessage(err)}`));
  provider.on('grant.revoked', (_ctx: KoaContextWithOIDC, grantId: string) => log(`grant.revoked ${grantId}`));
  provider.on('authorization.error', (ctx: KoaContextWithOIDC, err: unknown) => log(`authorization.error client=${clientIdOf(ctx)} ${errorMessage(err)}`));
  provider.on('revocation.error', (ctx: KoaContextWithOIDC, err: unknown) => log(`revocation.error client=${clientIdOf(ctx)} ${errorMessage(err)}`));
  provider.on('introspection.error', (ctx: KoaContextWithOIDC, err: unknown) => log(`introspection.error client=${clientIdOf(ctx)} ${errorMessage(err)}`));
  provider.on('end_session.success', (ctx: KoaContextWithOIDC) => log(`end_session.success client=${clientIdOf(ctx)}`));
  provider.on('end_session.error', (_ctx: KoaContextWithOIDC, err: unknown) => log(`end_session.error ${errorMessage(err)}`));
  provider.on('backchannel.success', (_ctx: unknown, client: { clientId: string }) => {
    counters.backchannelLogouts += 1;
    log(`backchannel.success client=${client.clientId}`);
  });
  provider.on('backchannel.error', (_ctx: unknown, err: unknown, client: { clientId: string }) => log(`backchannel.error client=${client.clientId} ${errorMessage(err)}`));
  provider.on('server_error', (_ctx: unknown, err: unknown) => log(`server_error ${errorMessage(err)}`));
  // Koa prints unhandled errors to stderr when nobody listens.
  (provider as unknown as NodeJS.EventEmitter).on('error', (err: unknown) => log(`error ${errorMessage(err)}`));
}
