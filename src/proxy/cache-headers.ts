/**
 * A session-gated route's answer as the browser and every cache in front of the gateway see it
 * (pure). The upstream saw the user's `Authorization` (or a credential of the gateway's, given
 * only to a session); they see a request with a cookie and no Authorization:
 *
 * - The answer varies by the cookie: `Vary: Cookie` is added (and `Authorization`, which no
 *   browser-side request carries, is read as `Cookie`). A browser cache kept Alice's answer for
 *   Bob signed in on the same browser after her session ended, since neither request differed.
 * - RFC 9111 §3.5 keeps an answer to a request with Authorization out of shared caches unless it
 *   says `public`, `s-maxage` or `must-revalidate`; nothing marks the browser's request so any
 *   more, so such an answer is marked `private` (unless it is `private` or `no-store` already).
 *   A 304 without a Cache-Control of its own gets none: it would replace the stored answer's.
 */

/** Whether `name` (any case) is `target` (lowercase): no allocation for names of another length. */
const named = (name: string, target: string) => name.length === target.length && name.toLowerCase() === target;

/** A list header's members (RFC 9110 §5.6.1), split on commas outside quoted strings, trimmed. */
function members(value: string): string[] {
  const out: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i <= value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x22 /* " */ && quoted && value.charCodeAt(i - 1) === 0x5c /* \ */) continue;
    if (c === 0x22) quoted = !quoted;
    else if ((c === 0x2c /* , */ && !quoted) || i === value.length) {
      const member = value.slice(start, i).trim();
      if (member !== '') out.push(member);
      start = i + 1;
    }
  }
  return out;
}

type Verdict = 'shareable' | 'private' | 'neither';

/** What a Cache-Control value says for shared caches. */
function verdict(value: string): Verdict {
  let result: Verdict = 'neither';
  for (const member of members(value)) {
    const eq = member.indexOf('=');
    const name = (eq === -1 ? member : member.slice(0, eq)).trim().toLowerCase();
    if (name === 'public' || name === 's-maxage' || name === 'must-revalidate') return 'shareable';
    // A qualified `private="Set-Cookie"` names fields only: the rest stays shareable.
    if (name === 'no-store' || (name === 'private' && eq === -1)) result = 'private';
  }
  return result;
}

/** The Vary value read for the cookie: `Cookie` once, `Authorization` dropped; `*` as it is. */
function varyOnCookie(value: string): string {
  const fields = members(value);
  if (fields.some((f) => f === '*')) return value;
  const kept = fields.filter((f) => !named(f, 'authorization') && !named(f, 'cookie'));
  return [...kept, 'Cookie'].join(', ');
}

/** `headers` (a raw list: name, value, ...) as the answer to the browser's cookie request; changed in place. */
export function asCookieAnswer(headers: string[], status: number): string[] {
  let cacheControl = -1;
  let vary = -1;
  let moreVary = false;
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
    }
  }
  if (says === 'neither') {
    if (cacheControl !== -1) {
      const value = (headers[cacheControl + 1] as string).trim();
      headers[cacheControl + 1] = value === '' ? 'private' : `${value}, private`;
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
