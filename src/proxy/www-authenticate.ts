/**
 * A defensive reader of WWW-Authenticate (RFC 9110 §11.6.1): a list of challenges, each a scheme
 * with either a token68 or comma-separated `name=value` parameters (token or quoted-string).
 * Several header lines arrive joined by ", ". Upstreams are not trusted to be well-formed: junk
 * ends the parse (what was read before it stands), nothing throws, and the work is bounded by
 * the header's length, which is capped. A comma left out between parameters is tolerated.
 */

export interface Challenge {
  /** Lowercased. */
  scheme: string;
  /** Names lowercased; the first of a repeated name wins. */
  params: Record<string, string>;
}

const MAX_HEADER_LENGTH = 8192;
const MAX_CHALLENGES = 16;

const isTchar = (c: number) =>
  (c >= 0x30 && c <= 0x39) || // 0-9
  (c >= 0x41 && c <= 0x5a) || // A-Z
  (c >= 0x61 && c <= 0x7a) || // a-z
  "!#$%&'*+-.^_`|~".includes(String.fromCharCode(c));
const isToken68 = (c: number) => isTchar(c) || c === 0x2f; /* / */
const isSpace = (c: number) => c === 0x20 || c === 0x09;

export function parseWwwAuthenticate(header: string | readonly string[] | undefined): Challenge[] {
  if (header === undefined) return [];
  const text = typeof header === 'string' ? header : header.join(', ');
  if (text.length > MAX_HEADER_LENGTH) return [];
  const challenges: Challenge[] = [];
  let i = 0;
  const skipSpace = () => {
    while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  };
  const readWhile = (ok: (c: number) => boolean) => {
    const start = i;
    while (i < text.length && ok(text.charCodeAt(i))) i++;
    return text.slice(start, i);
  };
  /** A quoted-string at i (which is a `"`), unescaped; undefined when unterminated. */
  const readQuoted = (): string | undefined => {
    let out = '';
    for (i++; i < text.length; i++) {
      const c = text[i];
      if (c === '"') {
        i++;
        return out;
      }
      if (c === '\\') i++;
      if (i >= text.length) return undefined;
      const code = text.charCodeAt(i);
      // qdtext / quoted-pair: HTAB, SP, VCHAR, obs-text; no other control characters.
      if (code < 0x20 && code !== 0x09) return undefined;
      if (code === 0x7f) return undefined;
      out += text[i];
    }
    return undefined;
  };

  let current: Challenge | undefined;
  while (i < text.length) {
    skipSpace();
    if (text[i] === ',') {
      i++;
      continue;
    }
    if (i >= text.length) break;
    const name = readWhile(isTchar);
    if (name.length === 0) break; // junk
    skipSpace();
    if (text[i] === '=' && current !== undefined && text[i + 1] !== '=') {
      // name=value: a parameter of the current challenge.
      i++;
      skipSpace();
      let value: string | undefined;
      if (text[i] === '"') value = readQuoted();
      else {
        value = readWhile(isTchar);
        if (value.length === 0) value = undefined;
      }
      if (value === undefined) break; // junk
      const valueEnd = i;
      skipSpace();
      // A value runs up to the next comma: `error=urn:x` is junk, not `error=urn`. Lenient
      // upstreams leave the comma out between parameters (`realm="api" error="invalid_token"`):
      // white space and then a name is taken as the next parameter or challenge.
      const spacedName = i > valueEnd && isTchar(text.charCodeAt(i));
      if (i < text.length && text[i] !== ',' && !spacedName) break;
      const key = name.toLowerCase();
      if (!(key in current.params)) current.params[key] = value;
      continue;
    }
    // `name=` with no challenge to belong to, or `name==`: junk.
    if (text[i] === '=') break;
    // A new challenge: the scheme, then perhaps a token68 (`Basic abc==`).
    if (challenges.length >= MAX_CHALLENGES) break;
    current = { scheme: name.toLowerCase(), params: Object.create(null) as Record<string, string> };
    challenges.push(current);
    const afterScheme = i;
    const token68 = readWhile(isToken68);
    if (token68.length > 0) {
      readWhile((c) => c === 0x3d); // trailing '='
      skipSpace();
      if (i < text.length && text[i] !== ',') {
        // Not a token68 after all (e.g. `Bearer realm="x"`): read it again as a parameter.
        i = afterScheme;
      }
    }
  }
  return challenges;
}
