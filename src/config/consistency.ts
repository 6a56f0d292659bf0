/**
 * The checks that read more than one key (schema.ts checks each key alone): the settings that
 * make sense only together, and the routes against each other and the gateway's own paths.
 * Pure: the parsed config in, key paths and sentences out (as safety.ts).
 *
 * They run even when a key's own check failed (and was reported), so they must not throw, or
 * every other problem would go unreported.
 */
import { canonicalPath, decodePath, looseReading, under } from './canonical-path.js';
import { unsafeSettings, type SafetyProblem } from './safety.js';
import type { ParsedConfig } from './schema.js';

export function configProblems(cfg: ParsedConfig): SafetyProblem[] {
  const problems: SafetyProblem[] = [];
  const issue = (path: (string | number)[], message: string) => problems.push({ path, message });

  if (cfg.oidc.clientAuthMethod === 'private_key_jwt' ? !cfg.oidc.privateKey : !cfg.oidc.clientSecret) {
    issue(
      cfg.oidc.clientAuthMethod === 'private_key_jwt' ? ['oidc', 'privateKey'] : ['oidc', 'clientSecret'],
      `is required for clientAuthMethod ${cfg.oidc.clientAuthMethod}`,
    );
  }
  if (!cfg.oidc.scopes.includes('openid')) issue(['oidc', 'scopes'], 'must include "openid"');

  const redisModes = [cfg.redis.url, cfg.redis.cluster, cfg.redis.sentinel].filter((m) => m !== undefined);
  if (redisModes.length !== 1) {
    issue(['redis'], 'must set exactly one of url, cluster or sentinel');
  }
  // Both listen on server.host: the second would fail with "address already in use". (0 is
  // any free port, a different one each.)
  if (cfg.server.metricsPort !== undefined && cfg.server.metricsPort !== 0 && cfg.server.metricsPort === cfg.server.port) {
    issue(['server', 'metricsPort'], 'must differ from server.port (PORT overrides server.port)');
  }
  if (cfg.session.absoluteTimeoutSeconds < cfg.session.idleTimeoutSeconds) {
    issue(['session', 'absoluteTimeoutSeconds'], 'must be at least session.idleTimeoutSeconds');
  }

  problems.push(...unsafeSettings(cfg));
  if (cfg.dev && cfg.server.workers !== 1) {
    issue(['server', 'workers'], 'must be 1 with dev: (the demo provider and API run in one process)');
  }
  problems.push(...routeProblems(cfg));
  return problems;
}

/** The routes against each other, server.authPath and the gateway's own endpoints; each route's settings together. */
function routeProblems(cfg: ParsedConfig): SafetyProblem[] {
  const problems: SafetyProblem[] = [];
  const issue = (path: (string | number)[], message: string) => problems.push({ path, message });
  const auth = cfg.server.authPath;
  // redirect_uri would be publicUrl + "//callback", which no request path can be.
  if (auth === '/') issue(['server', 'authPath'], 'must not be "/": the gateway\'s endpoints need a prefix of their own');
  // Compared as requests are matched (escapes decoded): /api/a!b and /api/a%21b are one route.
  const matchedForm = (p: string) => (typeof canonicalPath(p) === 'string' ? decodePath(p) : p);
  const authMatched = matchedForm(auth);
  const seen = new Set<string>();
  const seenLoose = new Set<string>();
  cfg.routes.forEach((route, i) => {
    const matched = matchedForm(route.path);
    if (seen.has(matched)) issue(['routes', i, 'path'], 'is used by another route');
    // An upstream that ignores case or drops trailing dots (proxy/routes.ts) could not tell
    // them apart: every call of either would be refused as ambiguous.
    else if (seenLoose.has(looseReading(matched))) issue(['routes', i, 'path'], 'differs from another route only in letter case or trailing dots and spaces');
    seen.add(matched);
    seenLoose.add(looseReading(matched));
    if (route.path === '/' || under(matched, authMatched)) {
      issue(['routes', i, 'path'], `must not be "/" or lie under server.authPath (${auth})`);
    } else if (under(authMatched, matched)) {
      // Routes are matched before the gateway's endpoints: logout, the callback, back-channel
      // logout would all go to the upstream.
      issue(['server', 'authPath'], `must not lie under routes[${i}].path (${route.path}): its requests would go to that upstream`);
    }
    if (['/healthz', '/readyz', '/metrics'].some((p) => route.path === p || route.path.startsWith(`${p}/`))) {
      issue(['routes', i, 'path'], 'must not shadow /healthz, /readyz or /metrics');
    }
    if (route.auth === 'apiKey' && !route.apiKey) issue(['routes', i, 'apiKey'], 'is required when auth is apiKey');
    if (route.auth !== 'apiKey' && route.apiKey) issue(['routes', i, 'apiKey'], 'is only allowed when auth is apiKey');
    if (route.stepUp && route.auth !== 'user') issue(['routes', i, 'stepUp'], 'needs auth: user (a signed-in session to judge)');
    if (route.stepUp && route.stepUp.acr === undefined && route.stepUp.maxAgeSeconds === undefined) {
      issue(['routes', i, 'stepUp'], 'must set acr, maxAgeSeconds or both');
    }
    const userRoute = route.auth === 'user' || route.auth === 'user-optional';
    if (route.dpop && !userRoute) issue(['routes', i, 'dpop'], 'is only allowed when auth is user or user-optional');
    if (route.tokenExchange && !userRoute) {
      issue(['routes', i, 'tokenExchange'], 'is only allowed when auth is user or user-optional');
    }
    if (route.tokenExchange && route.resource) issue(['routes', i, 'tokenExchange'], 'cannot be combined with resource (use tokenExchange.resource)');
    // An exchanged token is a bearer token for its own audience (docs/dpop-and-token-exchange.md).
    if (route.tokenExchange && route.dpop) issue(['routes', i, 'dpop'], 'cannot be combined with tokenExchange on the same route');
    if (route.scopes.length > 0 && route.auth === 'none') {
      issue(['routes', i, 'scopes'], 'has no effect when auth is none');
    }
  });
  return problems;
}
