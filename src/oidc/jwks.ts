/**
 * The provider's signing keys (jwks_uri), cached, with the gates that keep a provider's key
 * rotation from failing sign-ins and a flood of forged kids or a keys outage from becoming a
 * flood of requests to the provider.
 */
import { createRemoteJWKSet, customFetch, errors as joseErrors, type FlattenedJWSInput, type JWSHeaderParameters, type JWTVerifyGetKey } from 'jose';
import { boundedFetch } from './bounded-fetch.js';
import { steady } from '../clock.js';

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
 * refetches are `minIntervalMs` apart. Callers arriving while a fetch is under way wait for it
 * and look again, so concurrent sign-ins after a rotation all succeed; a kid that fetch did not
 * bring (it was answered before the rotation) then gets a refetch of its own, through the gates.
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
  // Every time here is an in-process interval: a step back of the host's clock left the gates
  // shut (no refetch, and a rotated key refused) for as long as the step.
  const now = steady(options.now ?? Date.now);
  const remote = createRemoteJWKSet(uri, {
    // jose never fetches by itself once it has a set: the wrapper below decides.
    cooldownDuration: Number.POSITIVE_INFINITY,
    cacheMaxAge: Number.POSITIVE_INFINITY,
    timeoutDuration: options.timeoutSeconds * 1000,
    [customFetch]: boundedFetch(),
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

  /** The outage gate: a fetch of any kind failed within the interval, so the keys are unavailable. */
  const failedRecently = (at: number) => lastFailure !== undefined && at - lastFetch < limits.minIntervalMs;

  return async (protectedHeader, token) => {
    const at = now();
    if (loadedAt === undefined) {
      // No set yet: the first fetch, or after a failed one, the next once minIntervalMs passed.
      if (!pending && failedRecently(at)) throw lastFailure;
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

  async function refetchFor(protectedHeader: JWSHeaderParameters, token: FlattenedJWSInput, noMatch: unknown): Promise<Awaited<ReturnType<JWTVerifyGetKey>>> {
    const at = now();
    // The keys are unavailable, this kid's too (and a flood of kids makes no more requests
    // than the periodic refresh does).
    if (failedRecently(at)) throw lastFailure;
    if (!pending) {
      const kid = protectedHeader.kid ?? '';
      if (!mayRefetch(kid, at)) throw noMatch;
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
