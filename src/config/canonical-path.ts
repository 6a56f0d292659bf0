/**
 * The canonical form of a request path (pure, no imports): the one form in which the gateway
 * matches routes, forwards to upstreams, and in which route paths are written in the config.
 * It lives in config/ because config may depend on nothing but errors, and route paths must be
 * judged by exactly these rules; proxy/canonical-path.ts applies it to request targets.
 *
 * - Percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) are decoded, the hex digits of
 *   every other escape are uppercased (RFC 3986 §6.2.2.1, §6.2.2.2): `/api/%61dmin` is
 *   `/api/admin`, as every decoding upstream reads it.
 * - What neighbours resolve differently is refused, never repaired: dot segments plain or
 *   encoded (RFC 3986 §5.2.4 on a decoding upstream, not on us) and any segment of dots and
 *   spaces only (Win32 drops trailing ones: `.. ` reads as `..`), servlet path parameters (`;`:
 *   Tomcat and Jetty read `/admin;x/` as `/admin/` and `..;` as `..`), encoded `/` `\` `?` `#`
 *   (segment or URL delimiters once decoded), `%25` (a second decoding pass turns `%252e` into
 *   `.`), a raw `\` (Windows and IIS read it as `/`), control characters raw or encoded, empty
 *   segments (nginx `merge_slashes` makes `//admin` into `/admin`), malformed escapes.
 * - Anything else stays as sent (other escapes, sub-delims, raw bytes above 0x7F): a decoding
 *   upstream and `decodePath` read them the same way.
 *
 * The common path has no `%`, no segment of dots only, no `;`, `\` or `//`: one scan over its
 * characters and it is returned unchanged, with no allocation.
 */

export type PathRefusalReason =
  | 'not_origin_form'
  | 'dot_segment'
  | 'path_parameter'
  | 'encoded_separator'
  | 'encoded_delimiter'
  | 'backslash'
  | 'double_encoding'
  | 'control_character'
  | 'empty_segment'
  | 'malformed_escape'
  // Not the path's own form but the routes': read as a looser upstream reads it (letter case,
  // trailing dots and spaces), it names a more specific route than the one it matches
  // (proxy/routes.ts).
  | 'route_ambiguous';

export interface PathRefusal {
  readonly refused: PathRefusalReason;
}

const refusal = (refused: PathRefusalReason): PathRefusal => Object.freeze({ refused });
const NOT_ORIGIN_FORM = refusal('not_origin_form');
const DOT_SEGMENT = refusal('dot_segment');
const PATH_PARAMETER = refusal('path_parameter');
const ENCODED_SEPARATOR = refusal('encoded_separator');
const ENCODED_DELIMITER = refusal('encoded_delimiter');
const BACKSLASH = refusal('backslash');
const DOUBLE_ENCODING = refusal('double_encoding');
const CONTROL_CHARACTER = refusal('control_character');
const EMPTY_SEGMENT = refusal('empty_segment');
const MALFORMED_ESCAPE = refusal('malformed_escape');

// What a raw character of the path is, by char code (0-255).
const PLAIN = 0;
const SLASH = 1;
const DOT = 2;
const PERCENT = 3;
const REFUSED = 4;
const SPACE = 5; // never raw in a request target (Node refuses it) nor a route path (its regex does)

const RAW = new Uint8Array(256);
const RAW_REFUSAL: (PathRefusal | undefined)[] = new Array<PathRefusal | undefined>(256).fill(undefined);
for (let c = 0; c < 0x20; c++) RAW_REFUSAL[c] = CONTROL_CHARACTER;
RAW_REFUSAL[0x7f] = CONTROL_CHARACTER;
RAW_REFUSAL[0x5c] = BACKSLASH; // \
RAW_REFUSAL[0x3b] = PATH_PARAMETER; // ;
// Not part of a path in origin-form (RFC 9112 §3.2.1); the caller has split the query off.
RAW_REFUSAL[0x3f] = ENCODED_DELIMITER; // ?
RAW_REFUSAL[0x23] = ENCODED_DELIMITER; // #
for (let c = 0; c < 256; c++) if (RAW_REFUSAL[c]) RAW[c] = REFUSED;
RAW[0x2f] = SLASH;
RAW[0x2e] = DOT;
RAW[0x25] = PERCENT;
RAW[0x20] = SPACE;

// What a percent-encoded byte is: decoded (unreserved), refused, or kept encoded (undefined).
const UNRESERVED = new Uint8Array(256);
for (const ch of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~') UNRESERVED[ch.charCodeAt(0)] = 1;
const ESCAPE_REFUSAL: (PathRefusal | undefined)[] = new Array<PathRefusal | undefined>(256).fill(undefined);
for (let b = 0; b < 0x20; b++) ESCAPE_REFUSAL[b] = CONTROL_CHARACTER;
ESCAPE_REFUSAL[0x7f] = CONTROL_CHARACTER;
ESCAPE_REFUSAL[0x2f] = ENCODED_SEPARATOR; // /
ESCAPE_REFUSAL[0x5c] = ENCODED_SEPARATOR; // \
ESCAPE_REFUSAL[0x3b] = PATH_PARAMETER; // ;
ESCAPE_REFUSAL[0x25] = DOUBLE_ENCODING; // %
ESCAPE_REFUSAL[0x3f] = ENCODED_DELIMITER; // ?
ESCAPE_REFUSAL[0x23] = ENCODED_DELIMITER; // #

const HEX_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) {
  HEX_VALUE['0123456789ABCDEF'.charCodeAt(i)] = i;
  HEX_VALUE['0123456789abcdef'.charCodeAt(i)] = i;
}
const hexValue = (c: number): number => (c < 128 ? (HEX_VALUE[c] as number) : -1);
const ESCAPE_TEXT = Array.from({ length: 256 }, (_, b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`);

/**
 * Why a segment made only of dots and spaces (after decoding) is refused, or undefined. "." and
 * ".." are dot segments; "...", ".. " or ". " are too, for Win32 names drop trailing dots and
 * spaces (an IIS or Windows upstream reads `/api/..%20/admin` as `/admin`), and a segment of
 * spaces only is an empty segment there.
 */
const blankSegment = (length: number, dots: number, blanks: number): PathRefusal | undefined =>
  length === 0 || blanks !== length ? undefined : dots > 0 ? DOT_SEGMENT : EMPTY_SEGMENT;

/**
 * The canonical form of `raw` (a path starting with "/", query excluded), or why it is refused.
 * Returns `raw` itself when it is already canonical.
 */
export function canonicalPath(raw: string): string | PathRefusal {
  const n = raw.length;
  if (n === 0 || raw.charCodeAt(0) !== 0x2f) return NOT_ORIGIN_FORM;
  let out = ''; // built only once the canonical form differs from raw
  let copied = 0; // raw[copied..] is not in `out` yet
  let length = 0; // characters of the current segment, an escape counting as one
  let dots = 0; // of which "." (plain or %2E)
  let blanks = 0; // of which "." or " " (plain or %2E, %20)
  for (let i = 1; i < n; i++) {
    const c = raw.charCodeAt(i);
    const kind = c < 256 ? (RAW[c] as number) : REFUSED;
    if (kind === PLAIN) {
      length++;
    } else if (kind === SLASH) {
      if (length === 0) return EMPTY_SEGMENT;
      if (blanks === length) return blankSegment(length, dots, blanks) as PathRefusal;
      length = 0;
      dots = 0;
      blanks = 0;
    } else if (kind === DOT) {
      length++;
      dots++;
      blanks++;
    } else if (kind === SPACE) {
      length++;
      blanks++;
    } else if (kind === PERCENT) {
      if (i + 2 >= n) return MALFORMED_ESCAPE;
      const c1 = raw.charCodeAt(i + 1);
      const c2 = raw.charCodeAt(i + 2);
      const hi = hexValue(c1);
      const lo = hexValue(c2);
      if (hi < 0 || lo < 0) return MALFORMED_ESCAPE;
      const byte = hi * 16 + lo;
      const refused = ESCAPE_REFUSAL[byte];
      if (refused) return refused;
      length++;
      if (UNRESERVED[byte] === 1) {
        if (byte === 0x2e) {
          dots++;
          blanks++;
        }
        out += raw.slice(copied, i) + String.fromCharCode(byte);
        copied = i + 3;
      } else {
        if (byte === 0x20) blanks++;
        if (c1 >= 0x61 || c2 >= 0x61) {
          out += raw.slice(copied, i) + (ESCAPE_TEXT[byte] as string);
          copied = i + 3;
        }
      }
      i += 2;
    } else {
      return c < 256 ? (RAW_REFUSAL[c] as PathRefusal) : CONTROL_CHARACTER;
    }
  }
  const blank = blankSegment(length, dots, blanks);
  if (blank) return blank;
  return copied === 0 ? raw : out + raw.slice(copied);
}

/**
 * A canonical path with every remaining escape decoded, byte for byte (each byte one char, as
 * raw bytes above 0x7F already are in Node's req.url): the path as a decoding upstream sees it.
 * Never contains a "/" that was not a separator, since canonical paths carry no %2F.
 */
export function decodePath(canonical: string): string {
  let at = canonical.indexOf('%');
  if (at === -1) return canonical;
  let out = '';
  let copied = 0;
  while (at !== -1) {
    const byte = hexValue(canonical.charCodeAt(at + 1)) * 16 + hexValue(canonical.charCodeAt(at + 2));
    out += canonical.slice(copied, at) + String.fromCharCode(byte);
    copied = at + 3;
    at = canonical.indexOf('%', copied);
  }
  return out + canonical.slice(copied);
}

/**
 * A decoded path as the loosest upstream reads it: UTF-8 read as text (decoded paths are byte
 * strings), full case folding both ways, so that `K` (Kelvin), `ſ` and `ß` meet `k`, `s` and
 * `ss` as well, and each segment's trailing dots and spaces dropped (Win32 names). Reading more
 * loosely than a given upstream does only refuses more. `İ` (U+0130) is the one letter whose
 * full lowercase (`i̇`, two code points) is not its simple one (`i`), which Java's
 * equalsIgnoreCase (and Spring's case-insensitive matching) compares by: read as `I`.
 */
export function looseReading(decoded: string): string {
  return Buffer.from(decoded, 'latin1').toString('utf8').replace(/\u0130/g, 'I').toUpperCase().toLowerCase().replace(/[. ]+(?=\/|$)/g, '');
}

/** `path` is `prefix` or below it, on a segment boundary. */
export function under(path: string, prefix: string): boolean {
  return path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 0x2f);
}
