/**
 * The bench gateway's config, one for every way a run starts it (bench/servers/gateway.ts in
 * process, bench/workers.ts through the CLI), and the provider's registration of its client.
 */
import { randomBytes } from 'node:crypto';

/** What a gateway process needs to join a run: the provider, its client, the run's Redis and upstream. */
export interface BenchGatewayInput {
  host: string;
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Shared by every gateway process of a run, so that one sign-in works on all of them. */
  sessionSecret: string;
  encryptionKey: string;
  redisUrl: string;
  upstream: string;
}

/** A fresh sessionSecret and encryptionKey for a run. */
export function benchSessionKeys(): Pick<BenchGatewayInput, 'sessionSecret' | 'encryptionKey'> {
  return { sessionSecret: randomBytes(32).toString('base64url'), encryptionKey: randomBytes(32).toString('base64') };
}

/**
 * The config document (SPEC §2 names), production-like: log level info, default scopes, one
 * `auth: user` route `/api` (Bearer) to the upstream; callers add what their variant needs.
 */
export function benchGatewayConfig(input: BenchGatewayInput, server: { port: number; publicUrl: string; workers?: number }) {
  return {
    server: { host: input.host, ...server },
    oidc: { issuer: input.issuer, clientId: input.clientId, clientSecret: input.clientSecret, scopes: ['openid', 'profile', 'email', 'offline_access'] },
    session: { secrets: [input.sessionSecret], encryptionKeys: [input.encryptionKey] },
    redis: { url: input.redisUrl, keyPrefix: 'bench:' },
    routes: [{ path: '/api', target: input.upstream, auth: 'user' }] as Record<string, unknown>[],
    log: { level: 'info' },
  };
}

/** The provider's registration of the gateway at `gatewayUrl` (bench/servers/idp.ts clients). */
export function benchGatewayClient(client: { id: string; secret: string }, gatewayUrl: string) {
  return {
    client_id: client.id,
    client_secret: client.secret,
    redirect_uris: [`${gatewayUrl}/auth/callback`],
    post_logout_redirect_uris: [`${gatewayUrl}/`],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
  };
}
