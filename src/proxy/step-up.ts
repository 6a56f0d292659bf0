/**
 * RFC 9470 step-up, the proxy's side: whether a session meets a route's `stepUp`, what an
 * upstream's `insufficient_user_authentication` challenge asks for, and the 401
 * step_up_required the SPA acts on. Pure: the clock and the return path are passed in.
 */
import { acrList, parseMaxAge } from '../config/auth-params.js';
import type { RouteConfig } from '../config/schema.js';
import { GatewayError } from '../errors.js';
import type { AuthData } from '../session/data.js';
import { parseWwwAuthenticate } from './www-authenticate.js';

/** What a new sign-in must bring: the acr values to ask for and/or the max_age. */
export interface StepUpAsk {
  acrValues?: string[];
  maxAge?: number;
}

/** The body fields of 401 step_up_required (SPEC §4), and the `step-up-required` event. */
export interface StepUpChallenge {
  acr_values: string | null;
  max_age: number | null;
  /** Relative: `{authPath}/login?acr_values=…&max_age=…&returnTo=…`, for the SPA to navigate to. */
  loginUrl: string;
}

type Requirement = NonNullable<RouteConfig['stepUp']>;

/**
 * The ask when the session does not meet `requirement`, else undefined. A session without
 * `acr` / `auth_time` (one from before 0.5.0, or a provider that sends neither) does not meet
 * a requirement on them. The age allows the clock tolerance, as the callback's max_age check
 * does: the provider's clock wrote auth_time. An auth_time in the future (a session signed in
 * before the callback refused such values) is no proof of a recent authentication.
 */
export function unmetStepUp(
  requirement: Requirement,
  auth: Pick<AuthData, 'acr' | 'authTime'>,
  nowSeconds: number,
  toleranceSeconds: number,
): StepUpAsk | undefined {
  const acrOk = requirement.acr === undefined || (auth.acr !== undefined && requirement.acr.includes(auth.acr));
  const ageOk =
    requirement.maxAgeSeconds === undefined ||
    (auth.authTime !== undefined &&
      nowSeconds - auth.authTime <= requirement.maxAgeSeconds + toleranceSeconds &&
      auth.authTime <= nowSeconds + toleranceSeconds);
  if (acrOk && ageOk) return undefined;
  return {
    ...(requirement.acr ? { acrValues: [...requirement.acr] } : {}),
    ...(requirement.maxAgeSeconds !== undefined ? { maxAge: requirement.maxAgeSeconds } : {}),
  };
}

/** The token schemes an upstream may challenge with (RFC 9470 §3 works with any of them). */
const STEP_UP_SCHEMES = new Set(['bearer', 'dpop']);

/**
 * The ask of an upstream's `insufficient_user_authentication` challenge (RFC 9470 §3) in the
 * `Bearer` or the `DPoP` (RFC 9449 §7.1) scheme, or undefined when the header holds no such
 * challenge. With several (`DPoP …, Bearer …`), the one in `preferredScheme` (the scheme the
 * request's token went in) wins, else the first. Its `acr_values` and `max_age` are kept only
 * when they pass the same syntax as /auth/login's: a malformed one is left out rather than
 * copied into a URL or a body.
 */
export function upstreamStepUp(header: string | readonly string[] | undefined, preferredScheme?: string): StepUpAsk | undefined {
  const challenges = parseWwwAuthenticate(header).filter(
    (c) => STEP_UP_SCHEMES.has(c.scheme) && c.params.error === 'insufficient_user_authentication',
  );
  const challenge = challenges.find((c) => c.scheme === preferredScheme) ?? challenges[0];
  if (!challenge) return undefined;
  const ask: StepUpAsk = {};
  // A challenge may space its values loosely; what is kept is the login syntax exactly.
  const acr = challenge.params.acr_values?.split(' ').filter((v) => v.length > 0);
  const acrValues = acr && acr.length > 0 ? acrList(acr.join(' ')) : undefined;
  if (acrValues) ask.acrValues = acrValues;
  const maxAge = challenge.params.max_age === undefined ? undefined : parseMaxAge(challenge.params.max_age);
  if (maxAge !== undefined) ask.maxAge = maxAge;
  return ask;
}

/** `returnTo` must already be a validated same-origin path (http/return-to.ts). */
export function stepUpChallenge(ask: StepUpAsk, authPath: string, returnTo: string): StepUpChallenge {
  const query = new URLSearchParams();
  if (ask.acrValues?.length) query.set('acr_values', ask.acrValues.join(' '));
  if (ask.maxAge !== undefined) query.set('max_age', String(ask.maxAge));
  query.set('returnTo', returnTo);
  return {
    acr_values: ask.acrValues?.length ? ask.acrValues.join(' ') : null,
    max_age: ask.maxAge ?? null,
    loginUrl: `${authPath}/login?${query.toString()}`,
  };
}

export function stepUpRequired(challenge: StepUpChallenge): GatewayError {
  return new GatewayError('step_up_required', { details: { ...challenge } });
}
