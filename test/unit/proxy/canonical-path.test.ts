/**
 * The canonical request path (SPEC §4): fixed cases from the review, and properties against
 * model upstreams: for any generated path, the route the gateway picks equals the route each
 * model upstream resolves the forwarded path to, or the request is refused. Each model also
 * runs as an upstream that ignores letter case (Express, ASP.NET, IIS).
 *
 * The properties fail if, in proxy/routes.ts `match`, the line
 * `for (const shadow of shadows) if (under(loose, shadow) || withFormat(loose, shadow)) return ROUTE_AMBIGUOUS;`
 * is removed; the Windows model's (trailing dots and spaces) also if looseReading stops dropping
 * them, and the format model's if `|| withFormat(loose, shadow)` is.
 */
import fc from 'fast-check';
import { routeSchema } from '../../../src/config/schema.js';
import { canonicalPath, canonicalTarget, decodePath, refusedPath } from '../../../src/proxy/canonical-path.js';
import { compileRoutes, type RouteMatcher } from '../../../src/proxy/routes.js';
import { routeMatcher } from '../../support/routes.js';

const route = (path: string, extra: Record<string, unknown> = {}) => routeSchema.parse({ path, target: 'http://up.internal', ...extra });
/** The matched route's path, 'refused', or undefined (no route). */
const picked = (match: RouteMatcher, canonical: string) => {
  const found = match(canonical);
  return found !== undefined && 'refused' in found ? 'refused' : found?.path;
};

describe('canonical path: fixed cases', () => {
  it.each([
    ['/api/%61dmin/users', '/api/admin/users'],
    ['/api/adm%69n', '/api/admin'],
    ['/api/%7e%2D%5F%2e%41z', '/api/~-_.Az'],
    ['/api/a%21b', '/api/a%21b'],
    ['/api/caf%c3%a9', '/api/caf%C3%A9'],
    ['/api/a%20', '/api/a%20'],
    ['/api/%20a', '/api/%20a'],
    ['/api/.a.', '/api/.a.'],
    ['/api/..x/x..', '/api/..x/x..'],
    ['/api/admin%20', '/api/admin%20'],
    ['/api/', '/api/'],
    ['/', '/'],
  ])('makes %s canonical as %s', (raw, canonical) => {
    expect(canonicalPath(raw)).toBe(canonical);
  });

  it.each([
    ['/api/../admin', 'dot_segment'],
    ['/api/./x', 'dot_segment'],
    ['/api/..', 'dot_segment'],
    ['/api/.', 'dot_segment'],
    ['/api/%2e%2e/admin', 'dot_segment'],
    ['/api/.%2E/admin', 'dot_segment'],
    ['/api/%2E/admin', 'dot_segment'],
    // Win32 names drop trailing dots and spaces: each of these is "." or ".." on IIS.
    ['/api/...', 'dot_segment'],
    ['/api/%2e%2e%2e', 'dot_segment'],
    ['/api/..%20/admin', 'dot_segment'],
    ['/api/.%20', 'dot_segment'],
    ['/api/%20..%20/admin', 'dot_segment'],
    ['/api/%20/admin', 'empty_segment'],
    ['/api/%20%20', 'empty_segment'],
    ['/api/..;/admin', 'path_parameter'],
    ['/api/.;/admin', 'path_parameter'],
    ['/api/admin;x/users', 'path_parameter'],
    ['/api/admin%3bx/users', 'path_parameter'],
    ['/api/a%2fb', 'encoded_separator'],
    ['/api/a%2Fb', 'encoded_separator'],
    ['/api/a%5cb', 'encoded_separator'],
    ['/api/a\\b', 'backslash'],
    ['/api/%252e%252e/admin', 'double_encoding'],
    ['/api/%25', 'double_encoding'],
    ['/api/a%00', 'control_character'],
    ['/api/a%0d%0a', 'control_character'],
    ['/api/a%7F', 'control_character'],
    ['/api/a\x01', 'control_character'],
    ['/api/a%3f', 'encoded_delimiter'],

    ['/api/a%23', 'encoded_delimiter'],
    ['/api/a#b', 'encoded_delimiter'],
    ['/api//admin', 'empty_segment'],
    ['//api', 'empty_segment'],
    ['/api/%', 'malformed_escape'],
    ['/api/%4', 'malformed_escape'],
    ['/api/%g1', 'malformed_escape'],
    ['http://evil.example/api', 'not_origin_form'],
    ['*', 'not_origin_form'],
    ['', 'not_origin_form'],
  ])('refuses %j (%s)', (raw, reason) => {
    expect(canonicalPath(raw)).toEqual({ refused: reason });
  });

  it('returns the very same string when nothing changes (the fast path)', () => {
    const raw = '/api/orders/42/items.json';
    expect(canonicalPath(raw)).toBe(raw);
  });

  it('keeps the query as sent and refuses targets that are not origin-form', () => {
    expect(canonicalTarget('/api/%61?x=%2e%2e/../%2f&y')).toBe('/api/a?x=%2e%2e/../%2f&y');
    const plain = '/api/orders?page=2';
    expect(canonicalTarget(plain)).toBe(plain);
    expect(canonicalTarget('http://x/api')).toEqual({ refused: 'not_origin_form' });
    expect(canonicalTarget('*')).toEqual({ refused: 'not_origin_form' });
    expect(canonicalTarget(undefined)).toEqual({ refused: 'not_origin_form' });
    expect(canonicalTarget('/api/..?x')).toEqual({ refused: 'dot_segment' });
  });

  it('answers a refusal with 400 invalid_request', () => {
    const error = refusedPath({ refused: 'dot_segment' });
    expect([error.status, error.code, error.description]).toEqual([400, 'invalid_request', 'The request path is ambiguous.']);
  });

  it('decodes what is left for matching, byte by byte', () => {
    expect(decodePath('/api/a%21b/caf%C3%A9')).toBe('/api/a!b/caf\u00c3\u00a9');
    const plain = '/api/x';
    expect(decodePath(plain)).toBe(plain);
  });
});

describe('routes on the canonical path', () => {
  const { match } = compileRoutes([route('/api'), route('/api/admin', { scopes: ['admin:write'] }), route('/api/a!b'), route('/api/x%21y')]);
  const pick = (raw: string) => {
    const canonical = canonicalPath(raw);
    return typeof canonical === 'string' ? picked(match, canonical) : canonical;
  };

  it('sends an encoded spelling of the admin route to the admin route, with its scopes', () => {
    expect(pick('/api/%61dmin/users')).toBe('/api/admin');
    expect((match(canonicalPath('/api/%61dmin/users') as string) as { scopes?: string[] }).scopes).toEqual(['admin:write']);
    expect(pick('/api/adminx')).toBe('/api');
  });

  it('refuses a path that names the admin route in another case: a case-blind upstream serves it there', () => {
    expect(pick('/api/ADMIN/users')).toBe('refused');
    expect(pick('/api/Admin')).toBe('refused');
    expect(pick('/api/%41dmin/users')).toBe('refused');
    expect(pick('/API/admin')).toBeUndefined();
    expect(pick('/api/ADMINX')).toBe('/api');
    expect(refusedPath(match('/api/ADMIN') as { refused: 'route_ambiguous' })).toMatchObject({ code: 'invalid_request', status: 400 });
  });

  it('folds case beyond ASCII, as a Unicode-aware upstream does', () => {
    const { match: m } = compileRoutes([route('/api'), route('/api/caf%C3%A9'), route('/api/kelvin'), route('/api/stra%C3%9Fe')]);
    expect(picked(m, '/api/CAF%C3%89')).toBe('refused');
    expect(picked(m, '/api/%E2%84%AAelvin')).toBe('refused');
    expect(picked(m, '/api/STRASSE')).toBe('refused');
    expect(picked(m, '/api/cafe')).toBe('/api');
  });

  // Fails if, in config/canonical-path.ts looseReading, `.replace(/\u0130/g, 'I')` is dropped:
  // `admİn` folds to `admi̇n` in full, where Java's equalsIgnoreCase (simple mappings, as Spring's
  // case-insensitive matching) reads `admin`, and the admin route's checks were passed by
  // (found by red team).
  it('folds İ (U+0130) to i, as Java compares case', () => {
    expect(pick('/api/adm%C4%B0n/users')).toBe('refused');
    expect(pick('/api/%C4%B0')).toBe('/api');
    const { match: m } = compileRoutes([route('/api'), route('/api/%C4%B0d')]);
    expect(picked(m, '/api/id')).toBe('refused');
    expect(picked(m, '/api/ID/x')).toBe('refused');
  });

  // Fails if, in proxy/routes.ts match, `|| withFormat(loose, shadow)` is dropped: Rails routes
  // `/api/admin.json` to the admin action, as Spring MVC before 5.3 did (found by red team).
  it('refuses a path that names the admin route with a format suffix, which Rails serves there', () => {
    for (const p of ['/api/admin.json', '/api/ADMIN.json', '/api/admin.tar.gz', '/api/admin.json/']) expect([p, pick(p)]).toEqual([p, 'refused']);
    for (const p of ['/api/admin.json/users', '/api/administrators.json', '/api/adminjson', '/api/x/admin.json']) expect([p, pick(p)]).toEqual([p, '/api']);
    expect(pick('/api/admin/users.json')).toBe('/api/admin');
  });

  it('refuses a path that names the admin route with a trailing dot or space, which Windows and IIS drop', () => {
    for (const p of ['/api/admin./users', '/api/admin.', '/api/admin%2E', '/api/admin%20', '/api/admin%20/users', '/api/admin.%20.']) {
      expect([p, pick(p)]).toEqual([p, 'refused']);
    }
  });

  // Fails if, in proxy/routes.ts compileRoutes, the shadows are again taken from longer routes
  // only (`.filter((other) => other.route !== route)` → `.filter((other) => other.decoded.length > decoded.length)`).
  it('takes every other route as a shadow, not only longer ones: a route no shorter in bytes may read as one below', () => {
    const { match: dots } = compileRoutes([route('/api'), route('/api/a..'), route('/api/a/b')]);
    expect(picked(dots, '/api/a../b')).toBe('refused');
    expect(picked(dots, '/api/a../c')).toBe('/api/a..');
    const { match: kelvin } = compileRoutes([route('/api'), route('/api/%E2%84%AA'), route('/api/k/x')]);
    expect(picked(kelvin, '/api/%E2%84%AA/x')).toBe('refused');
    expect(picked(kelvin, '/api/%E2%84%AA/y')).toBe('/api/%E2%84%AA');
  });

  it('serves a trailing dot or space that no looser reading takes to another route', () => {
    for (const p of ['/api/dns/example.com.', '/api/search/foo%20', '/api/v1.', '/api/v2..%20']) expect([p, pick(p)]).toEqual([p, '/api']);
    expect(pick('/api/admin/keys.')).toBe('/api/admin');
  });

  it('refuses a lowercase path that a route written in capitals names (the path needs no folding)', () => {
    const { match: m } = compileRoutes([route('/api'), route('/api/Admin')]);
    expect(picked(m, '/api/admin/x')).toBe('refused');
    expect(picked(m, '/api/Admin/x')).toBe('/api/Admin');
    expect(picked(m, '/api/other')).toBe('/api');
  });

  it('costs nothing for routes with no route below them in any case', () => {
    const { match: m } = compileRoutes([route('/api'), route('/live'), route('/API2')]);
    expect(picked(m, '/api/ADMIN')).toBe('/api');
    expect(picked(m, '/Live')).toBeUndefined();
  });

  it('matches escapes that remain the way a decoding upstream reads them, both ways round', () => {
    expect(pick('/api/a%21b/c')).toBe('/api/a!b');
    expect(pick('/api/a!b')).toBe('/api/a!b');
    expect(pick('/api/x!y/z')).toBe('/api/x%21y');
    expect(pick('/api/x%21yz')).toBe('/api');
  });

  it('strips a prefix by segments, not by characters', () => {
    const m = routeMatcher([route('/api/a!b', { stripPrefix: true })]);
    const path = canonicalPath('/api/a%21b/rest') as string;
    expect(path).toBe('/api/a%21b/rest');
    expect(m(path)?.upstreamPath(path)).toBe('/rest');
    expect(m('/api/a%21b')?.upstreamPath('/api/a%21b')).toBe('/');
    expect(m('/api/a!b/')?.upstreamPath('/api/a!b/')).toBe('/');
  });
});

describe('config route paths', () => {
  it.each(['/api/%61dmin', '/api/a%2fb', '/api/x;y', '/api//x', '/api/%2e%2e', '/api/%c3%a9', '/api/%25'])('refuses the non-canonical %s', (path) => {
    expect(routeSchema.safeParse({ path, target: 'http://up.internal' }).success).toBe(false);
  });
  it.each(['/api', '/api/a!b', '/api/caf%C3%A9', '/api/v1.2'])('accepts %s', (path) => {
    expect(routeSchema.safeParse({ path, target: 'http://up.internal' }).success).toBe(true);
  });
});

// ---- Model upstreams: how real servers read a path they are given. All work on byte strings
// (one char per byte, as Node's req.url carries raw bytes above 0x7F).

/** Every valid %XX decoded once; a malformed `%` stays as it is. */
function percentDecode(path: string): string {
  return path.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/** RFC 3986 §5.2.4 remove_dot_segments. */
function removeDotSegments(input: string): string {
  let rest = input;
  let out = '';
  while (rest.length > 0) {
    if (rest.startsWith('../')) rest = rest.slice(3);
    else if (rest.startsWith('./')) rest = rest.slice(2);
    else if (rest.startsWith('/./')) rest = rest.slice(2);
    else if (rest === '/.') rest = '/';
    else if (rest.startsWith('/../')) {
      rest = rest.slice(3);
      out = out.slice(0, Math.max(out.lastIndexOf('/'), 0));
    } else if (rest === '/..') {
      rest = '/';
      out = out.slice(0, Math.max(out.lastIndexOf('/'), 0));
    } else if (rest === '.' || rest === '..') rest = '';
    else {
      const next = rest.indexOf('/', rest.startsWith('/') ? 1 : 0);
      const end = next === -1 ? rest.length : next;
      out += rest.slice(0, end);
      rest = rest.slice(end);
    }
  }
  return out;
}

const MODELS: Record<string, (path: string) => string> = {
  /** (a) RFC 3986 decoder: full percent-decode, then remove_dot_segments. */
  rfc3986: (p) => removeDotSegments(percentDecode(p)),
  /** (b) servlet container: `;params` cut from every segment, then decode, then dot removal. */
  servlet: (p) =>
    removeDotSegments(
      percentDecode(
        p
          .split('/')
          .map((s) => s.split(';')[0])
          .join('/'),
      ),
    ),
  /** (c) nginx-like: decode, merge slashes, dot removal. */
  nginx: (p) => removeDotSegments(percentDecode(p).replace(/\/{2,}/g, '/')),
  /**
   * (d) Windows/IIS-like: decode, `\` is `/`, the trailing dots and spaces of each segment
   * dropped (Win32 path names: `/admin.` and `/admin%20` are `/admin`; a segment of dots and
   * spaces only reads, at worst, as ".." or "."), then dot removal.
   */
  windows: (p) =>
    removeDotSegments(
      percentDecode(p)
        .replace(/\\/g, '/')
        .split('/')
        .map((s) => (/^[. ]+$/.test(s) ? ['', '.', '..'][Math.min(s.replace(/ /g, '').length, 2)] : s.replace(/[. ]+$/, '')))
        .join('/'),
    ),
  /** (e) a double decoder (a framework decoding what its server already decoded). */
  doubleDecode: (p) => removeDotSegments(percentDecode(percentDecode(p))),
  /**
   * (f) Rails-like (`(.:format)` on every route) or Spring MVC before 5.3 (suffix patterns): an
   * RFC 3986 upstream that also reads the last segment without what follows its first dot.
   */
  format: (p) => removeDotSegments(percentDecode(p)).replace(/(\/[^/.]+)\.[^/]+(\/?)$/, '$1$2'),
};

const ROUTES = ['/api', '/api/admin', '/api/admin/keys', '/api/a!b', '/api/caf%C3%A9', '/live'];
const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** Byte string (one char per byte) to text, as an upstream decodes UTF-8. */
const utf8 = (bytes: string) => Buffer.from(bytes, 'latin1').toString('utf8');
/**
 * How an upstream serving all these routes picks one for a path it resolved itself: longest
 * prefix, by segments. `i`: as Express does (path-to-regexp, a case-insensitive RegExp over the
 * decoded text), not as the gateway folds.
 */
function upstreamRoute(resolved: string, flags = ''): string | undefined {
  const candidates = ROUTES.filter((p) => new RegExp(`^${escapeRegExp(utf8(decodePath(p)))}(?:/|$)`, flags).test(utf8(resolved)));
  return candidates.sort((a, b) => decodePath(b).length - decodePath(a).length)[0];
}

/** Some model upstream, as it is or case-blind, takes the path to another route than its decoded form names. */
function someReadingDiffers(canonical: string): boolean {
  const named = upstreamRoute(decodePath(canonical));
  return Object.values(MODELS).some((resolve) => upstreamRoute(resolve(canonical)) !== named || upstreamRoute(resolve(canonical), 'i') !== named);
}

const piece = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('api', 'admin', 'keys', 'live', 'a!b', 'caf', 'x', 'A', '1', '-', '_', '~', '.x', 'x.') },
  // escapes of every class: unreserved (both cases), sub-delims, delimiters, separators, controls, %, non-ASCII
  {
    weight: 6,
    arbitrary: fc.constantFrom('%61', '%41', '%6D', '%6d', '%2e', '%2E', '%7e', '%2D', '%5f', '%30', '%21', '%20', '%3A', '%40', '%2f', '%2F', '%5c', '%5C', '%3b', '%3B', '%3f', '%23', '%25', '%252e', '%252f', '%00', '%0a', '%1f', '%7f', '%c3%a9', '%C3%A9', '%e9', '%ff'),
  },
  { weight: 3, arbitrary: fc.constantFrom('.', '..', '...', '..%20', '%20', 'admin.', 'admin%20', 'admin%2E') },
  { weight: 2, arbitrary: fc.constantFrom(';', ';x', '..;', '.;', ';jsessionid=1') },
  { weight: 2, arbitrary: fc.constantFrom('\\', '\\..', '..\\') },
  { weight: 1, arbitrary: fc.constantFrom('%', '%4', '%g1', '%%') },
  // raw bytes above 0x7F, as Node's parser hands them over (UTF-8 é = C3 A9)
  { weight: 1, arbitrary: fc.constantFrom('\u00c3\u00a9', '\u00e9', '\u00ff') },
  { weight: 1, arbitrary: fc.constantFrom('!', '$', '&', "'", '(', ')', '*', '+', ',', '=', ':', '@') },
);
const segment = fc.oneof({ weight: 8, arbitrary: fc.array(piece, { minLength: 1, maxLength: 3 }).map((p) => p.join('')) }, { weight: 1, arbitrary: fc.constant('') });
// Half of the paths start like a route (in some spelling), so that every route gets picked.
const start = fc.constantFrom('', '/api', '/api/admin', '/api/%61dmin', '/ap%69/adm%69n', '/api/a%21b', '/api/caf%C3%A9', '/api/caf\u00c3\u00a9', '/live', '/API', '/api/ADMIN', '/api/Admin/KEYS', '/api/CAF%C3%89', '/api/admin/keys');
const mixed = fc
  .tuple(start, fc.array(segment, { minLength: 1, maxLength: 5 }))
  .map(([prefix, segments]) => `${prefix}/${segments.join('/')}`);
// Whole segments from the routes' own vocabulary, so that `//`, dots and `;` land between them.
const routeish = fc
  .array(fc.constantFrom('api', 'admin', 'keys', 'live', 'x', '', '', '.', '..', '..;', ';x', '%61dmin', 'a!b', 'a%21b', '%2e%2e', '%2E', 'caf%C3%A9', 'admin\\..', '%5c', 'Admin', 'KEYS', '%41DMIN', 'A!B', 'CAF%C3%89', 'admin.', 'admin%20', 'admin..', 'keys.'), { minLength: 1, maxLength: 5 })
  .map((segments) => `/${segments.join('/')}`);
const path = fc.oneof(mixed, routeish);
const runs = { numRuns: 3000 };
/** The same, always with the paths a Windows upstream reads as a route the gateway does not proxy. */
const pathRuns: fc.Parameters<[string]> = { ...runs, examples: [['/api.'], ['/api./%61'], ['/api%2e/'], ['/api/admin/..%20/x']] };

describe('canonical path: properties against model upstreams', () => {
  const { match } = compileRoutes(ROUTES.map((p) => route(p)));

  it('generates paths that are accepted as well as refused', () => {
    const sample = fc.sample(path, { numRuns: 2000, seed: 42 });
    const accepted = sample.filter((p) => typeof canonicalPath(p) === 'string');
    expect(accepted.length).toBeGreaterThan(200);
    expect(accepted.filter((p) => canonicalPath(p) !== p).length).toBeGreaterThan(50);
    const outcomes = new Set(accepted.map((p) => picked(match, canonicalPath(p) as string)));
    expect([...outcomes].sort()).toEqual([...ROUTES, 'refused', undefined].sort());
  });

  it.each(Object.keys(MODELS))('picks the route a %s upstream resolves the forwarded path to (as it is, or case-blind), or refuses', (model) => {
    const resolve = MODELS[model] as (p: string) => string;
    fc.assert(
      fc.property(path, (raw) => {
        const canonical = canonicalPath(raw);
        if (typeof canonical !== 'string') return;
        const [exact, caseBlind] = [upstreamRoute(resolve(canonical)), upstreamRoute(resolve(canonical), 'i')];
        const outcome = picked(match, canonical);
        // Refused, or not proxied at all, only where some upstream (of any model, as it is or
        // case-blind) reads the path as another route than the decoded path names: `/api.` is no
        // route here (a Windows upstream would read `/api`), and reaches no upstream. Else both
        // kinds of this upstream take the gateway's route (or, case-blind, one the gateway does
        // not proxy to at all). (Not proxying such a path failed this property in about one run
        // in ten: the generator rarely ends a route's segment with a dot.)
        if (outcome === 'refused' || (outcome === undefined && exact !== undefined)) expect(someReadingDiffers(canonical)).toBe(true);
        else {
          expect(outcome).toBe(exact);
          if (outcome !== undefined) expect(outcome).toBe(caseBlind);
        }
        // Canonicalising never changes what the upstream would have made of the raw path.
        expect(resolve(canonical)).toBe(resolve(raw));
      }),
      pathRuns,
    );
  });

  it('is idempotent, and the identity on canonical paths', () => {
    fc.assert(
      fc.property(path, (raw) => {
        const canonical = canonicalPath(raw);
        if (typeof canonical === 'string') expect(canonicalPath(canonical)).toBe(canonical);
      }),
      runs,
    );
  });

  it('returns a path unchanged when it has no "%", "\\", ";", "//" or segment of dots only', () => {
    const plainPiece = fc.constantFrom('api', 'x', '.x', 'x.', '!', '\u00e9', '~', '-');
    const plain = fc.array(fc.array(plainPiece, { minLength: 1, maxLength: 3 }).map((p) => p.join('')), { minLength: 1, maxLength: 5 });
    fc.assert(
      fc.property(plain, (segments) => {
        const raw = `/${segments.join('/')}`;
        expect(canonicalPath(raw)).toBe(raw);
      }),
      runs,
    );
  });
});
