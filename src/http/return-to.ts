/**
 * Open-redirect defence (RFC 9700 §4.11.1): `returnTo` must be a path on this origin. Browsers
 * treat `\` like `/` and ignore tabs/newlines inside URLs, so `//x`, `/\x` and `/\t/x` would
 * all leave the origin: anything but a plain `/`-rooted path is refused.
 */
const MAX_LENGTH = 2048;
const PROBE_ORIGIN = 'http://return-to.invalid';

export function isSameOriginRelativePath(value: string): boolean {
  if (value.length === 0 || value.length > MAX_LENGTH) return false;
  if (value[0] !== '/') return false;
  if (value[1] === '/' || value[1] === '\\') return false;
  // Control characters, whitespace and backslashes have no place in a path we redirect to.
  if (/[\u0000-\u0020\u007f-\u009f\\]/.test(value)) return false;
  let resolved: URL;
  try {
    resolved = new URL(value, PROBE_ORIGIN);
  } catch {
    return false;
  }
  return resolved.origin === PROBE_ORIGIN;
}
