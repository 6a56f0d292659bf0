/**
 * A session-gated route's answer as the browser and every cache in front of the gateway see it
 * (pure). The upstream saw the user's `Authorization` (or a credential of the gateway's, given
 * only to a session); they see a request with a cookie and no Authorization:
 *
 * - The answer varies by the cookie: `Vary: Cookie` is added (and `Authorization`, which no
 *   browser-side request carries, is read as `Cookie`). A browser cache kept Alice's answer for
 *   Bob signed in on the same browser after her session ended, since neither request differed.
 * - RFC 9111 §3.5 keeps an answer to a request with Authorization out of shared caches unless it
 *   says `public` or `s-maxage` (or `must-revalidate`: not here, see verdict); nothing marks the
 *   browser's request so any more, so such an answer is marked `private` (unless it is `private`
 *   or `no-store` already), and the headers that tell a CDN or nginx to cache regardless of
 *   Cache-Control (`CDN-Cache-Control`, `Surrogate-Control`, ...) are dropped. A 304 without a
 *   Cache-Control of its own gets none: it would replace the stored answer's.
 */

/**
 * Whether `name` (any case) is `target` (lowercase letters and `-`): lowercased only when its
 * length and first letter already match (this runs on every header of every session-gated answer).
 */
const named = (name: string, target: string) =>
  name.length === target.length && (name.charCodeAt(0) | 0x20) === target.charCodeAt(0) && name.toLowerCase() === target;

/**
 * A list header's members (RFC 9110 §5.6.1), split on commas outside quoted strings (where `\`
 * escapes the next character), trimmed; undefined when a quoted string never closes.
 */
function members(value: string): string[] | undefined {
  const out: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i <= value.length; i++) {
    const c = value.charCodeAt(i);
    if (quoted && c === 0x5c /* \ */) i++;
    else if (c === 0x22 /* " */) quoted = !quoted;
    else if ((c === 0x2c /* , */ && !quoted) || i === value.length) {
      const member = value.slice(start, i).trim();
      if (member !== '') out.push(member);
      start = i + 1;
    }
  }
  return quoted ? undefined : out;
}

type Verdict = 'shareable' | 'private' | 'neither';

/** Cache instructions for the caches in front (RFC 9213 and its kin) that overrule Cache-Control there. */
const CACHE_OVERRIDES = ['cdn-cache-control', 'surrogate-control', 'x-accel-expires', 'cloudflare-cdn-cache-control', 'edge-control'];
function isOverride(name: string): boolean {
  for (let i = 0; i < CACHE_OVERRIDES.length; i++) if (named(name, CACHE_OVERRIDES[i] as string)) return true;
  return false;
}

/**
 * What a Cache-Control value says for shared caches; one that does not parse says nothing. Only
 * `public` and `s-maxage` let a shared cache keep the answer: RFC 9111 §3.5 lets
 * `must-revalidate` do so too, but `max-age=0, must-revalidate` is how many private APIs ask
 * for revalidation, and a CDN revalidating for the next user (whose request the upstream may
 * answer 304 to) would hand them the first user's body.
 */
function verdict(value: string): Verdict {
  let result: Verdict = 'neither';
  for (const member of members(value) ?? []) {
    const eq = member.indexOf('=');
    const name = (eq === -1 ? member : member.slice(0, eq)).trim().toLowerCase();
    if (name === 'public' || name === 's-maxage') return 'shareable';
    // A qualified `private="Set-Cookie"` names fields only: the rest stays shareable.
    if (name === 'no-store' || (name === 'private' && eq === -1)) result = 'private';
  }
  return result;
}

/** The Vary value read for the cookie: `Cookie` once, `Authorization` dropped; `*` as it is. */
function varyOnCookie(value: string): string {
  const fields = members(value);
  // A quoted string that never closes would take in whatever is appended: vary on everything.
  if (fields === undefined) return '*';
  if (fields.some((f) => f === '*')) return value;
  const kept = fields.filter((f) => !named(f, 'authorization') && !named(f, 'cookie'));
  return [...kept, 'Cookie'].join(', ');
}

/** `headers` (a raw list: name, value, ...) as the answer to the browser's cookie request; changed in place. */
export function asCookieAnswer(headers: string[], status: number): string[] {
  let cacheControl = -1;
  let vary = -1;
  let moreVary = false;
  let overrides = false;
  let says: Verdict = 'neither';
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i] as string;
    if (named(name, 'vary')) {
      if (vary === -1) vary = i;
      else moreVary = true;
    } else if (named(name, 'cache-control')) {
      if (cacheControl === -1) cacheControl = i;
      const v = verdict(headers[i + 1] as string);
      if (v === 'shareable' || (v === 'private' && says === 'neither')) says = v;
    } else if (isOverride(name)) overrides = true;
  }
  // Rare: read again without them (the indices above are the unfiltered list's).
  if (overrides && says !== 'shareable') return asCookieAnswer(withoutOverrides(headers), status);
  if (says === 'neither') {
    if (cacheControl !== -1) {
      const value = (headers[cacheControl + 1] as string).trim();
      // Appended to a quoted string that never closes, `private` would be read as part of it.
      headers[cacheControl + 1] = value === '' || members(value) === undefined ? 'private' : `${value}, private`;
    } else if (status !== 304) headers.push('Cache-Control', 'private');
  }
  if (vary === -1) {
    headers.push('Vary', 'Cookie');
    return headers;
  }
  if (!moreVary) {
    headers[vary + 1] = varyOnCookie(headers[vary + 1] as string);
    return headers;
  }
  // Several Vary lines are one list: folded into the first.
  const out: string[] = [];
  const fields: string[] = [];
  let at = -1;
  for (let i = 0; i < headers.length; i += 2) {
    const isVary = named(headers[i] as string, 'vary');
    if (isVary) fields.push(headers[i + 1] as string);
    if (i === vary) at = out.length + 1;
    if (i === vary || !isVary) out.push(headers[i] as string, headers[i + 1] as string);
  }
  out[at] = varyOnCookie(fields.join(', '));
  return out;
}

function withoutOverrides(headers: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) if (!isOverride(headers[i] as string)) out.push(headers[i] as string, headers[i + 1] as string);
  return out;
}
