/**
 * The development provider (src/dev/idp.ts) on a free loopback port, with short lifetimes,
 * plus what tests need around it: stop/start with state kept, introspection, revocation of a
 * user's grants and forged back-channel logout tokens.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { decodeJwt, generateKeyPair, importJWK, SignJWT, type CryptoKey, type JWK } from 'jose';
import { createDevIdp, type DevClient, type DevIdp, type DevIdpCounters, type DevIdpOptions, type DevTtl } from '../../src/dev/idp.js';

export type { DevClient, DevIdp, DevIdpOptions };

export const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

export const TEST_TTL: Required<DevTtl> = {
  AccessToken: 60,
  ClientCredentials: 60,
  IdToken: 300,
  RefreshToken: 600,
  Session: 600,
  Grant: 600,
  Interaction: 300,
  AuthorizationCode: 60,
};

export interface ClientCredentials {
  client_id: string;
  client_secret: string;
}

export interface IntrospectionResult {
  active: boolean;
  /** True when the token is a JWT, which the provider cannot introspect: see DevIdp.jwtAccessTokenActive. */
  emulated?: boolean;
  [claim: string]: unknown;
}

export interface LogoutTokenOptions {
  /** Default RS256; 'none' makes an unsecured token. */
  alg?: string;
  /** Default: the signing key's kid. */
  kid?: string;
  /** Default 'logout+jwt'; null leaves it out. */
  typ?: string | null;
  /** 'foreign' signs with a fresh key the provider never published. */
  key?: 'provider' | 'foreign';
  header?: Record<string, unknown>;
}

export interface TestProvider {
  issuer: string;
  port: number;
  idp: DevIdp;
  counters: DevIdpCounters;
  clients: DevClient[];
  /** Stops listening (the provider looks down); state is kept. */
  stop(): Promise<void>;
  /** Listens again on the same port with the same state. */
  start(): Promise<void>;
  close(): Promise<void>;
  /** Default client: the first one configured. */
  introspect(token: string, client?: ClientCredentials): Promise<IntrospectionResult>;
  /** Default client: the first one configured. */
  revoke(token: string, client?: ClientCredentials, tokenTypeHint?: string): Promise<number>;
  /**
   * A logout token signed with the provider's key. Defaults: iss, aud (first client), iat,
   * exp (+2 min), jti, the back-channel logout event; `claims` override them, and a claim
   * set to undefined is left out. sub/sid come from the caller.
   */
  signLogoutToken(claims?: Record<string, unknown>, opts?: LogoutTokenOptions): Promise<string>;
  /** What the account page's Revoke button does. */
  revokeGrantsFor(accountId: string, clientId: string): Promise<number>;
}

export type TestProviderOptions = Partial<DevIdpOptions> & {
  clients: DevClient[];
  /**
   * The issuer when something stands in front of the provider (test/support/provider-front.ts):
   * the front's URL. Default: the provider's own http://127.0.0.1:PORT.
   */
  publicIssuer?: string;
};

function listen(server: http.Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function shutdown(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

function basicAuth(client: ClientCredentials): string {
  // RFC 6749 §2.3.1: form-encode both parts before base64.
  const encode = (v: string) => encodeURIComponent(v).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${encode(client.client_id)}:${encode(client.client_secret)}`).toString('base64')}`;
}

function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
}

function defaultLogger(): ((line: string) => void) | undefined {
  return process.env.DEV_IDP_LOG ? (line) => process.stderr.write(`[dev-idp] ${line}\n`) : undefined;
}

export async function startTestProvider(opts: TestProviderOptions): Promise<TestProvider> {
  let server = http.createServer();
  // The issuer names the port, so the port comes first.
  const requestedPort = opts.issuer ? Number(new URL(opts.issuer).port || 80) : 0;
  const port = await listen(server, requestedPort);
  const issuer = opts.publicIssuer ?? `http://127.0.0.1:${port}`;
  const logger = opts.logger ?? defaultLogger();
  const idp = await createDevIdp({
    ...opts,
    issuer,
    ttl: { ...TEST_TTL, ...opts.ttl },
    ...(logger ? { logger } : {}),
  });
  server.on('request', idp.handler);
  const firstClient = (): ClientCredentials => {
    const client = opts.clients[0];
    if (!client) throw new Error('startTestProvider: no client configured');
    return client;
  };
  let foreignKey: CryptoKey | undefined;

  const endpoint = (path: string) => `${issuer}${path}`;
  return {
    issuer,
    port,
    idp,
    counters: idp.counters,
    clients: opts.clients,
    stop: () => shutdown(server),
    start: async () => {
      if (server.listening) return;
      server = http.createServer(idp.handler);
      await listen(server, port);
    },
    close: () => shutdown(server),
    introspect: (token, client = firstClient()) => introspect(idp, endpoint('/token/introspection'), token, client),
    revoke: async (token, client = firstClient(), tokenTypeHint) => {
      const body = new URLSearchParams({ token, ...(tokenTypeHint ? { token_type_hint: tokenTypeHint } : {}) });
      const res = await fetch(endpoint('/token/revocation'), { method: 'POST', headers: { authorization: basicAuth(client) }, body });
      await res.arrayBuffer();
      return res.status;
    },
    signLogoutToken: async (claims = {}, signOpts = {}) => {
      if (signOpts.key === 'foreign' && !foreignKey) foreignKey = (await generateKeyPair('RS256')).privateKey;
      return signLogoutToken(idp, issuer, firstClient().client_id, claims, signOpts, foreignKey);
    },
    revokeGrantsFor: (accountId, clientId) => idp.revokeGrantsFor(accountId, clientId),
  };
}

async function introspect(idp: DevIdp, url: string, token: string, client: ClientCredentials): Promise<IntrospectionResult> {
  if (looksLikeJwt(token)) {
    // oidc-provider answers unsupported_token_type for structured tokens.
    const active = await idp.jwtAccessTokenActive(token);
    return active ? { ...decodeJwt(token), active, emulated: true } : { active, emulated: true };
  }
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: basicAuth(client), accept: 'application/json' },
    body: new URLSearchParams({ token }),
  });
  const body = (await res.json()) as IntrospectionResult;
  if (!res.ok) throw new Error(`introspection failed with ${res.status}: ${JSON.stringify(body)}`);
  return body;
}

function withoutUndefined(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined));
}

function unsecuredJwt(header: Record<string, unknown>, payload: Record<string, unknown>): string {
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${part(header)}.${part(payload)}.`;
}

async function signLogoutToken(
  idp: DevIdp,
  issuer: string,
  audience: string,
  claims: Record<string, unknown>,
  opts: LogoutTokenOptions,
  foreignKey: CryptoKey | undefined,
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const payload = withoutUndefined({
    iss: issuer,
    aud: audience,
    iat: now,
    exp: now + 120,
    jti: randomUUID(),
    events: { [BACKCHANNEL_LOGOUT_EVENT]: {} },
    ...claims,
  });
  const alg = opts.alg ?? 'RS256';
  const providerJwk = idp.privateJwks.keys[0] as JWK | undefined;
  const kid = opts.kid ?? (opts.key === 'foreign' ? 'foreign-key' : providerJwk?.kid);
  const header = withoutUndefined({ alg, kid, typ: opts.typ === undefined ? 'logout+jwt' : (opts.typ ?? undefined), ...opts.header });
  if (alg === 'none') return unsecuredJwt(header, payload);
  const key = opts.key === 'foreign' ? foreignKey : providerJwk ? await importJWK(providerJwk, alg) : undefined;
  if (!key) throw new Error('no signing key');
  return new SignJWT(payload).setProtectedHeader(header as { alg: string }).sign(key);
}
