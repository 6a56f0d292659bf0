import { GatewayError } from '../errors.js';

const GONE = Symbol('session-gone');

/**
 * login_required because the session's record is gone: something else ended it (a logout
 * elsewhere, a new sign-in of the same browser, a timeout) before or while this call ran. The
 * cookie the call came with may no longer be the browser's: the new session's has the same name
 * (http/proxy-routes.ts leaves it alone).
 */
export function sessionGone(): GatewayError {
  return Object.assign(new GatewayError('login_required'), { [GONE]: true as const });
}

export const isSessionGone = (err: unknown): boolean => err instanceof GatewayError && (err as { [GONE]?: true })[GONE] === true;
