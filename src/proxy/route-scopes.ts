/**
 * A route's `scopes` against those the session holds now (pure): its sign-in token's `scope` as
 * the provider last stated it (a refresh may narrow it: the user withdrew consent), else what
 * sign-in recorded. Checked on the set the token comes from, after every refresh too.
 */
import { GatewayError } from '../errors.js';
import type { AuthData } from '../session/data.js';
import type { TokenSet } from '../session/tokens.js';
import type { CompiledRoute } from './routes.js';

/** 403 insufficient_scope naming the scopes the route requires and the session lacks. */
export function requireScopes(route: CompiledRoute, auth: AuthData, tokens: TokenSet): void {
  if (route.scopes.length === 0 || route.scopes.every((s) => holdsScope(auth, tokens, s))) return;
  const missing = route.scopes.filter((s) => !holdsScope(auth, tokens, s));
  throw new GatewayError('insufficient_scope', {
    description: `This API requires the scope${missing.length > 1 ? 's' : ''} ${missing.join(', ')}, which this session was not granted.`,
  });
}

/**
 * grantedScopes (oidc/granted.ts) asked about one scope, without building the list on every call:
 * `openid`, or listed in the token set's `scope`, or (none stated) in what sign-in recorded.
 */
function holdsScope(auth: AuthData, tokens: TokenSet, scope: string): boolean {
  if (scope === 'openid') return true;
  const stated = tokens.scope;
  if (stated === undefined) return auth.scopes.includes(scope);
  for (let at = stated.indexOf(scope); at !== -1; at = stated.indexOf(scope, at + 1)) {
    const end = at + scope.length;
    if ((at === 0 || stated.charCodeAt(at - 1) === 32) && (end === stated.length || stated.charCodeAt(end) === 32)) return true;
  }
  return false;
}
