/**
 * Open-redirect defence (RFC 9700 §4.11.1): `returnTo` must be a path on this origin, and every
 * redirect back into the app is an absolute URL on publicUrl's origin.
 *
 * The check runs on the value as a browser would resolve it (WHATWG URL: `\` read as `/`, tabs
 * and newlines dropped, dot segments removed) and again on each percent-decoded form, because
 * an SPA router or a decoding server sees `/%2f%2fevil` as `//evil`. So `/.//evil`,
 * `/%2e%2e//evil`, `/%2f%2fevil`, `/%09/evil`, `/%5cevil` are refused, not only `//evil`.
 */
const MAX_LENGTH = 2048;
const PROBE_ORIGIN = 'http://return-to.invalid';
/** `%252f` decodes to `%2f`, then to `/`: look through a few layers of encoding. */
const MAX_DECODE_ROUNDS = 4;

// Control characters, whitespace and backslashes have no place in a path we redirect to...
const FORBIDDEN_RAW = /[\u0000-\u0020\u007f-\u009f\\]/;
// ...and once decoded, only an encoded space (`%20`) is still an ordinary path character.
const FORBIDDEN_DECODED = /[\u0000-\u001f\u007f-\u009f\\]/;

/** One path form is safe when it is `/`-rooted, not `//` or `/\`, and resolves on the origin. */
function safeForm(path: string, forbidden: RegExp): boolean {
  if (path[0] !== '/' || path[1] === '/' || path[1] === '\\' || forbidden.test(path)) return false;
  let resolved: URL;
  try {
    resolved = new URL(path, PROBE_ORIGIN);
  } catch {
    return false;
  }
  // After dot-segment removal `/.//x` is `//x`: a path that a relative Location would send away.
  return resolved.origin === PROBE_ORIGIN && !resolved.pathname.startsWith('//');
}

function decodeOnce(path: string): string | undefined {
  try {
    return decodeURIComponent(path);
  } catch {
    return undefined; // malformed %-sequences: no legitimate returnTo has them
  }
}

export function isSameOriginRelativePath(value: string): boolean {
  if (value.length === 0 || value.length > MAX_LENGTH) return false;
  if (!safeForm(value, FORBIDDEN_RAW)) return false;
  // Only the path is judged after decoding: an encoded `//` in the query is just data.
  let path = new URL(value, PROBE_ORIGIN).pathname;
  for (let round = 0; round < MAX_DECODE_ROUNDS; round += 1) {
    if (!safeForm(path, FORBIDDEN_DECODED)) return false;
    const decoded = decodeOnce(path);
    if (decoded === undefined) return false;
    if (decoded === path) return true;
    path = decoded;
  }
  return false; // still changing after that many rounds: refuse rather than guess
}

/**
 * The absolute URL on `publicOrigin` for a validated returnTo, with extra query parameters.
 * Only the path, query and fragment of the value are used, set on a URL that already has the
 * app's origin: whatever the value holds, the result cannot name another origin, and a
 * browser has nothing relative left to reinterpret.
 */
export function appUrl(publicOrigin: string, returnTo: string, params: Record<string, string> = {}): string {
  const target = new URL(publicOrigin);
  const parsed = URL.parse(returnTo, PROBE_ORIGIN);
  if (parsed?.origin === PROBE_ORIGIN) {
    target.pathname = parsed.pathname;
    target.search = parsed.search;
    target.hash = parsed.hash;
  }
  for (const [name, value] of Object.entries(params)) target.searchParams.set(name, value);
  return target.href;
}
