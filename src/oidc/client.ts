/**
 * Provider discovery and the openid-client Configuration. Discovery runs in the background
 * with backoff until it succeeds, so the gateway starts (and /readyz says what is missing)
 * even while the provider is down; requests that need it get 503 provider_unavailable.
 */
import { createPrivateKey } from 'node:crypto';
import * as oidc from 'openid-client';
import type { JWTVerifyGetKey } from 'jose';
import type { OidcConfig } from '../config/schema.js';
import { isLoopbackHost } from '../config/schema.js';
import { GatewayError } from '../errors.js';
import { parseNonce } from '../crypto/dpop.js';
import { providerAcceptsDpop } from './dpop.js';
import { insecureEndpoints } from './metadata.js';
import type { Tracing } from '../observability/tracing.js';
import { tracedFetch } from './traced-fetch.js';
import { createJwks, type JwksRefetchLimits } from './jwks.js';
import { boundedFetch } from './bounded-fetch.js';

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
  /** Limits on JWKS refetches for unknown kids (defaults: see createJwks). */
  jwksRefetch?: Partial<JwksRefetchLimits>;
  /** Discovery retry backoff: first delay and cap, in ms (default 500 → 30 000). */
  retry?: { initialMs: number; maxMs: number };
  /**
   * Sessions use DPoP (config.derived.dpop): a provider that does not advertise ES256 in
   * `dpop_signing_alg_values_supported` is refused like a foreign issuer (/readyz stays 503).
   */
  requireDpop?: boolean;
  /** Told every DPoP-Nonce the provider sends (RFC 9449 §8), to share it (redis/dpop-nonces.ts). */
  onDpopNonce?: (origin: string, nonce: string) => void;
  /** When enabled, every provider call after discovery is a child span (traced-fetch.ts). */
  tracing?: Tracing;
  /** The runtime's clock (ms), for the JWKS refetch limits. */
  clock?: () => number;
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

export async function discover(
  cfg: OidcConfig,
  timeoutSeconds: number,
  dpop: Pick<ProviderHandleOptions, 'requireDpop' | 'onDpopNonce'> = {},
): Promise<oidc.Configuration> {
  const issuer = new URL(cfg.issuer);
  // The ID token signature is verified with jose against `jwks` (see id-token.ts) rather
  // than with enableNonRepudiationChecks: openid-client refuses an unknown kid while its JWKS
  // cache is under 60 s old, and by then the one-time code is spent, so a provider key
  // rotation would break sign-in.
  const execute: Array<(c: oidc.Configuration) => void> = [];
  if (issuer.protocol === 'http:' && isLoopbackHost(issuer.hostname)) execute.push(oidc.allowInsecureRequests);
  // openid-client checks the ID token's exp and nbf itself (code exchange, refresh) before
  // id-token.ts does; without this it would use its own 30 s whatever the config says.
  const metadata: Partial<oidc.ClientMetadata> = { [oidc.clockTolerance]: cfg.clockToleranceSeconds };
  const providerFetch = boundedFetch();
  const bounded: oidc.CustomFetch = (url, options) => providerFetch(url, options as RequestInit);
  const configuration = await oidc.discovery(issuer, cfg.clientId, metadata, clientAuthentication(cfg), {
    execute,
    timeout: timeoutSeconds,
    [oidc.customFetch]: bounded,
  });
  configuration.timeout = timeoutSeconds;
  // Refused like a foreign issuer: discovery keeps retrying and /readyz stays 503.
  const refused = insecureEndpoints(issuer, configuration.serverMetadata());
  if (refused.length > 0) {
    throw new GatewayError('provider_unavailable', {
      description: `The provider metadata names endpoints that are not https: ${refused.join(', ')}.`,
    });
  }
  if (dpop.requireDpop && !providerAcceptsDpop(configuration.serverMetadata())) {
    throw new GatewayError('provider_unavailable', {
      description: 'DPoP is configured but the provider metadata does not list ES256 in dpop_signing_alg_values_supported.',
    });
  }
  configuration[oidc.customFetch] = bounded;
  const onNonce = dpop.onDpopNonce;
  if (onNonce) {
    configuration[oidc.customFetch] = async (url, options) => {
      const response = await providerFetch(url, options as RequestInit);
      const nonce = parseNonce(response.headers.get('dpop-nonce') ?? undefined);
      if (nonce) onNonce(new URL(url).origin, nonce);
      return response;
    };
  }
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
      const configuration = await discover(cfg, timeoutSeconds, options);
      if (closed) return;
      const metadata = configuration.serverMetadata();
      if (!metadata.jwks_uri) throw new Error('provider metadata has no jwks_uri');
      // Around whatever fetch discovery chose (e.g. the DPoP nonce reader), never instead of it.
      if (options.tracing?.enabled) configuration[oidc.customFetch] = tracedFetch(options.tracing, metadata, configuration[oidc.customFetch]);
      const jwks = createJwks(new URL(metadata.jwks_uri), {
        timeoutSeconds,
        ...(options.jwksRefetch ? { refetch: options.jwksRefetch } : {}),
        ...(options.clock ? { now: options.clock } : {}),
      });
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
