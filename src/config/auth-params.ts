/**
 * The syntax of authentication-context values the gateway accepts, shared by the config schema
 * (a route's `stepUp`) and the login endpoint (the SPA's `acr_values`, `max_age`): one rule,
 * so that a route's requirement can always be asked for at /auth/login.
 */

/**
 * One `acr` value: URI characters only (RFC 3986 unreserved and reserved, and `%`), so that it
 * can be written unquoted into a URL query, a JSON body and a space-separated list without
 * escaping questions. No space, quote, backslash, angle bracket or control character.
 */
const ACR_VALUE = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]{1,200}$/;

/** At most this many acr values in one request or route. */
export const MAX_ACR_VALUES = 8;

/** max_age above a year is no freshness requirement at all; refused as a likely mistake. */
export const MAX_AGE_LIMIT_SECONDS = 366 * 24 * 3600;

export function isAcrValue(value: string): boolean {
  return ACR_VALUE.test(value);
}

const MAX_AGE = /^(0|[1-9][0-9]{0,8})$/;

/** A `max_age` as written in a query or challenge: whole seconds up to the limit, else undefined. */
export function parseMaxAge(value: string): number | undefined {
  const seconds = MAX_AGE.test(value) ? Number(value) : Number.NaN;
  return seconds <= MAX_AGE_LIMIT_SECONDS ? seconds : undefined;
}

/**
 * Space-separated acr values (single spaces, none empty), each of the acr syntax, at most
 * MAX_ACR_VALUES, duplicates dropped; undefined when any of that fails.
 */
export function acrList(value: string): string[] | undefined {
  const list = value.split(' ');
  if (list.length > MAX_ACR_VALUES || !list.every(isAcrValue)) return undefined;
  return [...new Set(list)];
}
