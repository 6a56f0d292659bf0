/**
 * Which requests may start a sign-in: a navigation of a top-level window, or of a frame on the
 * gateway's own origin. Every start spends the caller's address budget (`rateLimit.loginPerMinute`)
 * and a place under `rateLimit.maxActiveLogins`, stores a transaction for ten minutes, and sets a
 * login cookie (past six, the oldest are cleared, and the sign-in they belonged to fails). A page
 * on any site could do all of that without a click: `<img src=…/auth/login>` on a timer kept
 * everyone behind the visitor's address from signing in, and gave a flood as many networks as the
 * page had visitors (found by red team). With `session.sameSite: strict` the login bounce stopped
 * such requests from another site only, not from a sibling subdomain.
 *
 * Judged on Fetch Metadata, which every current browser sends, `Sec-Fetch-Site` always among it:
 * `Sec-Fetch-Mode` other than `navigate` (an image, a script, a fetch), or a nested navigation
 * (`Sec-Fetch-Dest` other than `document`) from any origin but ours. A request without
 * `Sec-Fetch-Site` starts as before: an older browser cannot be told from a navigation, and
 * Node's fetch sends `Sec-Fetch-Mode: cors` alone, on every request, whatever it is told.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** Why this request may not start a sign-in, or undefined when it may. */
export function notASignInStart(headers: IncomingHttpHeaders): string | undefined {
  const site = headers['sec-fetch-site'];
  if (site === undefined) return undefined;
  const mode = headers['sec-fetch-mode'];
  if (mode !== undefined && mode !== 'navigate') return 'A sign-in starts only from a navigation, not from a subresource or script request.';
  const dest = headers['sec-fetch-dest'];
  if (dest !== undefined && dest !== 'document' && site !== 'same-origin') {
    return 'A sign-in starts only in a top-level window or in a frame of this origin.';
  }
  return undefined;
}
