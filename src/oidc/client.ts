/**
 * Provider discovery and the openid-client Configuration. Discovery runs in the background
 * with backoff until it succeeds, so the gateway starts (and /readyz says what is missing)
 * even while the provider is down; requests that need it get 503 provider_unavailable.
 */
import { createPrivateKey } from 'node:crypto';
import * as oidc from 'openid-client';
import { createRemoteJWKSet, errors as joseErrors, type FlattenedJWSInput, type JWSHeaderParameters, type JWTVerifyGetKey } from 'jose';
import type { OidcConfig } from '../config/schema.js';
import { isLoopbackHost } from '../config/schema.js';
import { GatewayError } from '../errors.js';
import { parseNonce } from '../crypto/dpop.js';
import { providerAcceptsDpop } from './dpop.js';
import { insecureEndpoints } from './metadata.js';
import type { Tracing } from '../observability/tracing.js';
import { tracedFetch } from './traced-fetch.js';

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
}

export interface JwksRefetchLimits {
  /** A kid that was not in a freshly fetched set is not refetched for again within this. */
  perKidSeconds: number;
  /**
   * Refetches for unknown kids, all kids together, are at least this far apart; so are the
   * periodic refresh's attempts, and after a failed fetch of any kind no kid fetches again
   * within it (the outage gate).
   */
  minIntervalMs: number;
}

const DEFAULT_REFETCH: JwksRefetchLimits = { perKidSeconds: 60, minIntervalMs: 1000 };
/** Bound on the per-kid memory, so a flood of forged kids cannot grow it without limit. */
const MAX_REMEMBERED_KIDS = 1000;

/** How old a fetched key set may grow before it is fetched again (in the background). */
const KEY_SET_MAX_AGE_MS = 10 * 60 * 1000;

/**
 * The provider's keys, cached. A token naming an unknown `kid` makes one refetch however recent
 * the last fetch was (OIDC Core §10.1.1: the provider may rotate at any time), so a sign-in
 * right after a rotation still succeeds; jose's own cooldown would refuse it for 30 s. Floods of
 * forged kids stay bounded: a kid is refetched for at most once per `perKidSeconds`, and
 * refetches are `minIntervalMs` apart. Callers arriving while a refetch is under way wait for it
 * and look again, without a fetch of their own, so concurrent sign-ins after a rotation all
 * succeed.
 *
 * Every fetch goes through that one gate, the set's periodic refresh too: jose's own (a set
 * older than its cacheMaxAge is fetched again before each verification, and a failed fetch
 * leaves it old) made every token one request to a provider whose keys were down, from anyone
 * able to post a back-channel logout token, and failed every sign-in though the cached keys
 * were good. A set older than KEY_SET_MAX_AGE_MS is refreshed in the background, its keys still
 * used meanwhile and while the refresh fails; with no set at all, a failed fetch is not tried
 * again for `minIntervalMs` (the calls in between fail as the fetch did: the keys are unavailable).
 */
export function createJwks(
  uri: URL,
  options: { timeoutSeconds: number; refetch?: Partial<JwksRefetchLimits>; now?: () => number },
): JWTVerifyGetKey {
  const limits = { ...DEFAULT_REFETCH, ...options.refetch };
  const now = options.now ?? Date.now;
  const remote = createRemoteJWKSet(uri, {
    // jose never fetches by itself once it has a set: the wrapper below decides.
    cooldownDuration: Number.POSITIVE_INFINITY,
    cacheMaxAge: Number.POSITIVE_INFINITY,
    timeoutDuration: options.timeoutSeconds * 1000,
  });
  const lastRefetchForKid = new Map<string, number>();
  /** The last refetch for an unknown kid (the kid gate), and the last fetch of any kind (the outage gate). */
  let lastRefetch = Number.NEGATIVE_INFINITY;
  let lastFetch = Number.NEGATIVE_INFINITY;
  /** When a set was last fetched; undefined until one was. */
  let loadedAt: number | undefined;
  let lastFailure: unknown;
  let pending: Promise<void> | undefined;

  function mayRefetch(kid: string, at: number): boolean {
    if (at - lastRefetch < limits.minIntervalMs) return false;
    const previous = lastRefetchForKid.get(kid);
    return previous === undefined || at - previous >= limits.perKidSeconds * 1000;
  }

  function remember(kid: string, at: number): void {
    lastRefetchForKid.delete(kid);
    lastRefetchForKid.set(kid, at);
    // Map iteration is insertion order: the oldest entries go first.
    for (const key of lastRefetchForKid.keys()) {
      if (lastRefetchForKid.size <= MAX_REMEMBERED_KIDS) break;
      lastRefetchForKid.delete(key);
    }
  }

  /** The one fetch in flight, shared by every caller that waits for it. */
  function fetchSet(at: number): Promise<void> {
    lastFetch = at;
    pending = remote
      .reload()
      .then(
        () => {
          loadedAt = now();
          lastFailure = undefined;
        },
        (err: unknown) => {
          lastFailure = err;
          throw err;
        },
      )
      .finally(() => {
        pending = undefined;
      });
    return pending;
  }

  return async (protectedHeader, token) => {
    const at = now();
    if (loadedAt === undefined) {
      // No set yet: the first fetch, or after a failed one, the next once minIntervalMs passed.
      if (!pending && at - lastFetch < limits.minIntervalMs && lastFailure !== undefined) throw lastFailure;
      await (pending ?? fetchSet(at));
    } else if (at - loadedAt >= KEY_SET_MAX_AGE_MS && !pending && at - lastFetch >= limits.minIntervalMs) {
      fetchSet(at).catch(() => undefined);
    }
    try {
      return await remote(protectedHeader, token);
    } catch (err) {
      if (!(err instanceof joseErrors.JWKSNoMatchingKey)) throw err;
      if (pending) {
        // A fetch under way (the periodic refresh, another kid's refetch) may bring the kid, or
        // may have been answered before the provider rotated: still unknown after it, the kid
        // gets its own refetch, through the same gates.
        await pending.catch(() => undefined);
        try {
          return await remote(protectedHeader, token);
        } catch (again) {
          if (!(again instanceof joseErrors.JWKSNoMatchingKey)) throw again;
        }
      }
      return refetchFor(protectedHeader, token, err);
    }
  };

  async function refetchFor(protectedHeader: JWSHeaderParameters, token: FlattenedJWSInput, unknown: unknown): Promise<Awaited<ReturnType<JWTVerifyGetKey>>> {
    const at = now();
    // A fetch of any kind failed within the interval: the keys are unavailable, this kid's too
    // (and a flood of kids makes no more requests than the periodic refresh does).
    if (lastFailure !== undefined && at - lastFetch < limits.minIntervalMs) throw lastFailure;
    if (!pending) {
      const kid = protectedHeader.kid ?? '';
      if (!mayRefetch(kid, at)) throw unknown;
      lastRefetch = at;
      // The kid is remembered only once a set was fetched without it: a refetch the provider
      // failed (5xx, not a key set, timeout) says nothing about the kid, and remembering it
      // would refuse that kid's sign-ins as invalid for perKidSeconds after the provider is back.
      void fetchSet(at).then(
        () => remember(kid, at),
        () => undefined,
      );
    }
    await pending;
    return remote(protectedHeader, token);
  }
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
  const configuration = await oidc.discovery(issuer, cfg.clientId, metadata, clientAuthentication(cfg), {
    execute,
    timeout: timeoutSeconds,
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
  const onNonce = dpop.onDpopNonce;
  if (onNonce) {
    configuration[oidc.customFetch] = async (url, options) => {
      const response = await fetch(url, options as RequestInit);
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
      const jwks = createJwks(new URL(metadata.jwks_uri), { timeoutSeconds, ...(options.jwksRefetch ? { refetch: options.jwksRefetch } : {}) });
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
