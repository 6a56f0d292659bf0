/**
 * The HTTP side of step-up (RFC 9470): a route's `stepUp` judged before the upstream is called,
 * and an upstream's insufficient_user_authentication challenge, both answered 401
 * step_up_required with a ready `loginUrl` (proxy/step-up.ts).
 *
 * The loginUrl's `returnTo` is the page the call came from when the browser says so (the path
 * of a same-origin `Referer`, if it passes the returnTo rules), else `/`. Only the path: a
 * page's query may hold what should not travel on (the demo SPA sends no Referer at all). The
 * SPA may put its own path in instead: /auth/login judges returnTo again either way.
 */
import type { IncomingMessage } from 'node:http';
import type { Config } from '../config/load.js';
import type { GatewayError } from '../errors.js';
import { stepUpChallenge, stepUpRequired, unmetStepUp, upstreamStepUp, type StepUpAsk, type StepUpChallenge } from '../proxy/step-up.js';
import type { CompiledRoute } from '../proxy/routes.js';
import type { LoadedSession } from '../proxy/bearer.js';
import { isSameOriginRelativePath } from './return-to.js';

/** Told of every step_up_required the gateway answers (e.g. for /auth/events); default: nobody. */
export type StepUpListener = (event: { sessionDigest: string | undefined; challenge: StepUpChallenge }) => void;

export interface StepUp {
  /** Throws 401 step_up_required when the route has a `stepUp` the session does not meet. */
  checkRoute(req: IncomingMessage, route: CompiledRoute, session: LoadedSession | undefined): void;
  /**
   * The error for an upstream 401 with an insufficient_user_authentication challenge, else
   * undefined; `scheme` is the one the route's token goes in (fixed per route: `dpop` or `bearer`).
   */
  fromUpstream(req: IncomingMessage, wwwAuthenticate: string | readonly string[] | undefined, scheme: 'dpop' | 'bearer'): GatewayError | undefined;
}

export interface StepUpDeps {
  config: Config;
  clock: () => number;
  /** The session a request was served for (no Redis): for the listener, on the rare upstream challenge. */
  sessionDigestOf: (req: IncomingMessage) => string | undefined;
  listener?: StepUpListener;
}

export function returnToFrom(referer: string | undefined, publicOrigin: string): string {
  const url = referer !== undefined && referer.length <= 4096 ? URL.parse(referer) : null;
  if (!url || url.origin !== publicOrigin) return '/';
  return isSameOriginRelativePath(url.pathname) ? url.pathname : '/';
}

/** How often one session is told of the same step-up ask, at most (per process). */
export const STEP_UP_TELL_EVERY_MS = 10_000;
/**
 * How many step-up events one session is told per STEP_UP_TELL_EVERY_MS, whatever the asks: an
 * upstream chooses them, and one that varied its acr_values turned every refused call into an
 * event for every tab.
 */
const TELLS_PER_WINDOW = 3;
const TOLD_MAX = 10_000;

/** Sets `key` as the newest entry of `map`, forgetting the oldest past TOLD_MAX. */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  if (map.size >= TOLD_MAX) map.delete(map.keys().next().value as string);
  map.set(key, value);
}

export function createStepUp(deps: StepUpDeps): StepUp {
  const { config, clock } = deps;
  const listener = deps.listener ?? (() => {});
  const { authPath } = config.server;
  const tolerance = config.oidc.clockToleranceSeconds;
  // When each session was last told of each ask. Every refused call would otherwise be one
  // PUBLISH on the events bus: a page retrying a step-up route (or an upstream that keeps
  // challenging) would turn each call into a Redis command and an event for every tab.
  const told = new Map<string, number>();
  // Each session's window of events an upstream asked for, whatever the asks (TELLS_PER_WINDOW).
  const budget = new Map<string, { since: number; count: number }>();

  /** Counts one event in the session's window; false when the window has none left. */
  function spend(sessionDigest: string, now: number): boolean {
    const spent = budget.get(sessionDigest);
    if (spent !== undefined && now - spent.since < STEP_UP_TELL_EVERY_MS) {
      if (spent.count >= TELLS_PER_WINDOW) return false;
      spent.count += 1;
      return true;
    }
    remember(budget, sessionDigest, { since: now, count: 1 });
    return true;
  }

  function tell(sessionDigest: string | undefined, challenge: StepUpChallenge, upstreamChosen: boolean): void {
    if (sessionDigest !== undefined) {
      const key = `${sessionDigest} ${challenge.acr_values ?? ''} ${challenge.max_age ?? ''}`;
      const now = clock();
      const last = told.get(key);
      if (last !== undefined && now - last < STEP_UP_TELL_EVERY_MS) return;
      // Only what an upstream asks spends the budget: a route's own stepUp asks what the config
      // says (few), and an upstream's noise must not silence it.
      if (upstreamChosen && !spend(sessionDigest, now)) return;
      remember(told, key, now);
    }
    try {
      listener({ sessionDigest, challenge });
    } catch {
      // A listener (e.g. the events bus) never changes the answer the browser gets.
    }
  }

  function required(req: IncomingMessage, ask: StepUpAsk, sessionDigest: string | undefined, upstreamChosen: boolean): GatewayError {
    const challenge = stepUpChallenge(ask, authPath, returnToFrom(req.headers.referer, config.derived.publicOrigin));
    tell(sessionDigest, challenge, upstreamChosen);
    return stepUpRequired(challenge);
  }

  return {
    checkRoute(req, route, session) {
      // A route without stepUp costs this one property read.
      // Without a signed-in session with tokens, the credential step answers login_required.
      if (!route.stepUp || !session?.auth || !session.tokens?.sealed) return;
      const ask = unmetStepUp(route.stepUp, session.auth, Math.floor(clock() / 1000), tolerance);
      if (ask) throw required(req, ask, session.digest, false);
    },
    fromUpstream(req, wwwAuthenticate, scheme) {
      const ask = upstreamStepUp(wwwAuthenticate, scheme);
      return ask ? required(req, ask, deps.sessionDigestOf(req), true) : undefined;
    },
  };
}
