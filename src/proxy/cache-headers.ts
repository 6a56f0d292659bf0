/**
 * A user route's answer as the browser and every cache in front of the gateway see it (pure).
 * The upstream saw `Authorization: Bearer`; they see a request with a cookie and no
 * Authorization. What the upstream said about Authorization is said about the cookie:
 *
 * - `Vary: Authorization` becomes `Vary: Cookie`: a browser cache kept Alice's answer for Bob
 *   signed in on the same browser (the Vary matched: neither request carried Authorization).
 * - RFC 9111 §3.5 keeps an answer to a request with Authorization out of shared caches unless it
 *   says `public`, `s-maxage` or `must-revalidate`; nothing marks the browser's request so any
 *   more, so such an answer is marked `private` (unless it is `private` or `no-store` already).
 */

/** Whether `name` (any case) is `target` (lowercase): no allocation for names of another length. */
const named = (name: string, target: string) => name.length === target.length && name.toLowerCase() === target;

const SHAREABLE = new Set(['public', 's-maxage', 'must-revalidate']);

/** The directive names of a Cache-Control value, lowercased (arguments dropped). */
function directives(value: string): string[] {
  return value.split(',').map((d) => {
    const eq = d.indexOf('=');
    return (eq === -1 ? d : d.slice(0, eq)).trim().toLowerCase();
  });
}

/** The Vary value with `Authorization` read as `Cookie` (once). */
function varyOnCookie(value: string): string {
  const fields = value.split(',').map((f) => f.trim());
  if (!fields.some((f) => named(f, 'authorization'))) return value;
  const out: string[] = [];
  for (const f of fields) {
    const field = named(f, 'authorization') ? 'Cookie' : f;
    if (f !== '' && !out.some((o) => o.toLowerCase() === field.toLowerCase())) out.push(field);
  }
  return out.join(', ');
}

/** `headers` (a raw list: name, value, ...) as the answer to the browser's cookie request; changed in place. */
export function asCookieAnswer(headers: string[]): string[] {
  let cacheControl = -1;
  let shareable = false;
  let privateAlready = false;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i] as string;
    if (named(name, 'vary')) headers[i + 1] = varyOnCookie(headers[i + 1] as string);
    else if (named(name, 'cache-control')) {
      if (cacheControl === -1) cacheControl = i;
      const value = headers[i + 1] as string;
      for (const d of directives(value)) {
        if (SHAREABLE.has(d)) shareable = true;
        else if (d === 'no-store' || (d === 'private' && !/private\s*=/i.test(value))) privateAlready = true;
      }
    }
  }
  if (shareable || privateAlready) return headers;
  if (cacheControl === -1) headers.push('Cache-Control', 'private');
  else headers[cacheControl + 1] = `${headers[cacheControl + 1] as string}, private`;
  return headers;
}
