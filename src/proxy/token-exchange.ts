/**
 * RFC 8693 token exchange for a route with `tokenExchange` (SPEC §4): the session's access token
 * is traded for one meant for the route's API (`audience`, `scope`, `resource`), kept in the
 * session's sealed token set under the route's path, and traded again when it is due for renewal
 * (within `refreshSkewSeconds` of expiry, or halfway through a shorter life: renewalMargin).
 *
 * It runs through the refresh coordinator (session/refresh.ts) as a refresh does: one provider
 * call per expiry across requests and instances (lock + re-read + version compare-and-set), and
 * the exchanged token is written in the same atomic write as the rest of the set, so an older
 * set never overwrites it. The subject must be fresh: when the session's own token is about to
 * expire, the caller refreshes that first (its own coordinated write) and exchanges after, so a
 * failed exchange can never lose a rotated refresh token.
 */
import type { CompiledRoute } from './routes.js';
import type { RefreshFn } from '../session/refresh.js';
import { lifeOf, nowSeconds, type ResourceToken, type TokenSet } from '../session/tokens.js';
import type { ExchangeRequest } from '../oidc/grants.js';
import type { GrantedTokens } from '../oidc/granted.js';
import { GatewayError } from '../errors.js';
import { digest } from '../redis/keys.js';
import { createGrantBackoff } from './grant-backoff.js';

export type Exchange = (subjectToken: string, request: ExchangeRequest) => Promise<GrantedTokens>;

/**
 * What an exchanged token was asked for: audience, scope and resource. Tokens are cached under
 * the route's path, and a route's tokenExchange may change between deployments (a new
 * audience, a wider or narrower scope) while sessions live on.
 */
export function exchangeRequestKey(request: ExchangeRequest): string {
  let key = requestKeys.get(request);
  if (key === undefined) {
    key = JSON.stringify([request.audience, request.scope ?? null, request.resource ?? null]);
    requestKeys.set(request, key);
  }
  return key;
}
/** Per config object (routes live as long as the process): no string built per call. */
const requestKeys = new WeakMap<ExchangeRequest, string>();

/**
 * The route's exchanged token in a token set, if there is one and it answered the route's
 * current exchange request (else a new exchange is made: never a token for another audience).
 */
export function exchangedToken(tokens: TokenSet, route: CompiledRoute & { tokenExchange: ExchangeRequest }): ResourceToken | undefined {
  const token = tokens.exchanged?.[route.path];
  return token !== undefined && token.exchangedFor === exchangeRequestKey(route.tokenExchange) ? token : undefined;
}

/**
 * The RefreshFn that exchanges the set's access token for the route's and adds it to the set.
 * An answer without `expires_in` is kept DEFAULT_TOKEN_LIFETIME_SECONDS (as client tokens are),
 * not for the rest of the session.
 */
export function exchangeFor(route: CompiledRoute & { tokenExchange: ExchangeRequest }, exchange: Exchange, clock: () => number): RefreshFn {
  return async (current) => {
    const got = await exchange(current.accessToken, route.tokenExchange);
    const token: ResourceToken = {
      accessToken: got.accessToken,
      ...lifeOf(got, nowSeconds(clock)),
      ...(got.scope !== undefined ? { scope: got.scope } : {}),
      exchangedFor: exchangeRequestKey(route.tokenExchange),
    };
    return { ...current, exchanged: { ...current.exchanged, [route.path]: token } };
  };
}

/**
 * `exchange`, remembering its failures per subject token and exchange request: the provider's
 * refusals (403 insufficient_scope: the policy does not allow this audience or scope, or the
 * subject token is no longer accepted) and its outages (502 token_refresh_failed: 5xx, 429, a
 * refused client, an answer that is not a token response, a timeout) alike. The same exchange
 * is not asked again for 1 s, doubling to 30 s while the failures go on (grant-backoff.ts), and
 * is answered with the failure meanwhile. Either was asked again on every call of the route:
 * each cheap call of a signed-in script, one client-authenticated grant, at a provider already
 * failing. A new subject token (the session's token refreshed) asks afresh.
 */
export function rememberRefusals(exchange: Exchange, clock: () => number): Exchange {
  const refused = createGrantBackoff<GatewayError>(clock);
  return async (subjectToken, request) => {
    const key = `${digest(subjectToken)} ${exchangeRequestKey(request)}`;
    const known = refused.pending(key);
    if (known) throw known.error;
    try {
      const got = await exchange(subjectToken, request);
      refused.succeeded(key);
      return got;
    } catch (err) {
      if (err instanceof GatewayError) refused.failed(key, err);
      throw err;
    }
  };
}
