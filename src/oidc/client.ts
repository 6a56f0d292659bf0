/**
 * Provider discovery and the openid-client Configuration. Discovery runs in the background
 * with backoff until it succeeds, so the gateway starts (and /readyz says what is missing)
 * even while the provider is down; requests that need it get 503 provider_unavailable.
 */
import { createPrivateKey } from 'node:crypto';
import * as oidc from 'openid-client';
import { createRemoteJWKSet, type JWTVerifyGetKey } from 'jose';
import type { OidcConfig } from '../config/schema.js';
import { isLoopbackHost } from '../config/schema.js';
import { GatewayError } from '../errors.js';

export interface ProviderState {
  configuration: oidc.Configuration;
  metadata: Readonly<oidc.ServerMetadata>;
  /** The provider's signing keys; refetched (rate-limited) when a token names an unknown kid. */
  jwks: JWTVerifyGetKey;
}

export interface ProviderHandle {
  /** The provider state, or 503 provider_unavailable while discovery has not succeeded. */
  get(): ProviderState;
  isReady(): boolean;
  /** Resolves once discovery has succeeded (or rejects when closed first). */
  ready(): Promise<ProviderState>;
  close(): void;
}

export interface ProviderHandleOptions {
  /** Seconds for each provider HTTP call. */
  timeoutSeconds?: number;
  onDiscoveryError?: (err: unknown, attempt: number, retryInMs: number) => void;
  onReady?: (state: ProviderState) => void;
  /** Minimum seconds between JWKS refetches on an unknown kid. */
  jwksCooldownSeconds?: number;
  /** Discovery retry backoff: first delay and cap, in ms (default 500 → 30 000). */
  retry?: { initialMs: number; maxMs: number };
}

/**
 * The provider's keys, cached. A token naming an unknown `kid` makes jose refetch the set, at
 * most once per `cooldownSeconds`, so a provider key rotation never breaks sign-in and a flood
 * of forged kids cannot turn into a flood of fetches.
 */
export function createJwks(uri: URL, options: { cooldownSeconds: number; timeoutSeconds: number }): JWTVerifyGetKey {
  return createRemoteJWKSet(uri, {
    cooldownDuration: options.cooldownSeconds * 1000,
    cacheMaxAge: 10 * 60 * 1000,
    timeoutDuration: options.timeoutSeconds * 1000,
  });
}

export function clientAuthentication(cfg: OidcConfig): oidc.ClientAuth {
  switch (cfg.clientAuthMethod) {
    case 'client_secret_post':
      return oidc.ClientSecretPost(cfg.clientSecret);
    case 'private_key_jwt':
      return oidc.PrivateKeyJwt(importPrivateKey(cfg.privateKey ?? ''));
    default:
      return oidc.ClientSecretBasic(cfg.clientSecret);
  }
}

function importPrivateKey(pem: string): oidc.CryptoKey {
  const key = createPrivateKey(pem);
  if (key.asymmetricKeyType === 'ec') {
    return key.toCryptoKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign']);
  }
  return key.toCryptoKey({ name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, false, ['sign']);
}

export async function discover(cfg: OidcConfig, timeoutSeconds: number): Promise<oidc.Configuration> {
  const issuer = new URL(cfg.issuer);
  // The ID token signature is verified with jose against `jwks` (see id-token.ts) rather
  // than with enableNonRepudiationChecks: openid-client refuses an unknown kid while its JWKS
  // cache is under 60 s old, and by then the one-time code is spent, so a provider key
  // rotation would break sign-in.
  const execute: Array<(c: oidc.Configuration) => void> = [];
  if (issuer.protocol === 'http:' && isLoopbackHost(issuer.hostname)) execute.push(oidc.allowInsecureRequests);
  const configuration = await oidc.discovery(issuer, cfg.clientId, undefined, clientAuthentication(cfg), {
    execute,
    timeout: timeoutSeconds,
  });
  configuration.timeout = timeoutSeconds;
  return configuration;
}

export function createProviderHandle(cfg: OidcConfig, options: ProviderHandleOptions = {}): ProviderHandle {
  const timeoutSeconds = options.timeoutSeconds ?? 10;
  let state: ProviderState | undefined;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let resolveReady!: (s: ProviderState) => void;
  let rejectReady!: (e: Error) => void;
  const readyPromise = new Promise<ProviderState>((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  readyPromise.catch(() => undefined);

  async function attempt(n: number): Promise<void> {
    if (closed) return;
    try {
      const configuration = await discover(cfg, timeoutSeconds);
      if (closed) return;
      const metadata = configuration.serverMetadata();
      if (!metadata.jwks_uri) throw new Error('provider metadata has no jwks_uri');
      const jwks = createJwks(new URL(metadata.jwks_uri), { cooldownSeconds: options.jwksCooldownSeconds ?? 10, timeoutSeconds });
      state = { configuration, metadata, jwks };
      options.onReady?.(state);
      resolveReady(state);
    } catch (err) {
      const { initialMs, maxMs } = options.retry ?? { initialMs: 500, maxMs: 30_000 };
      const delay = Math.min(initialMs * 2 ** Math.min(n, 10), maxMs);
      options.onDiscoveryError?.(err, n + 1, delay);
      if (!closed) timer = setTimeout(() => void attempt(n + 1), delay);
    }
  }
  void attempt(0);

  return {
    get() {
      if (!state) throw new GatewayError('provider_unavailable');
      return state;
    },
    isReady: () => state !== undefined,
    ready: () => readyPromise,
    close() {
      closed = true;
      clearTimeout(timer);
      rejectReady(new Error('closed'));
    },
  };
}
