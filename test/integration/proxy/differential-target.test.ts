/**
 * Differential, property-based: the request target across the whole trust boundary (SPEC §4,
 * "one canonical form"). Raw bytes from a client → the real gateway (real provider, real Redis,
 * a signed-in session) → real upstream servers that record exactly what they received and how
 * Node, Express (req.path, req.query and its router) and a decoding server read it.
 *
 * Property, for every generated request target: either the gateway refuses it (a 4xx in the
 * SPEC §6 shape, or Node's own parser refuses it first) and no upstream is called, or exactly
 * one upstream is called, the one of the route the gateway matched, with the gateway's
 * canonical target, and every upstream reading of what it received lies under that route's
 * prefix and names no other route. Never a 5xx, never a hang.
 *
 * Routes: `/api/a` (user) and `/api/a/admin` (user, a scope the test user lacks: a route a
 * looser reading must never reach through `/api/a`), `/api/b` (user, a target with a path of
 * its own) and `/api/b/open` (auth none), `/s/x-y` (stripPrefix), `/api/caf%C3%A9` (an escape).
 * Each has an upstream of its own, so the upstream called names the route the gateway chose.
 *
 * Fails (checked by hand) if src/app.ts forwards the target as received
 * (`if (typeof target === 'string') req.url = target;` → `... void target;`): the property.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import express from 'express';
// @ts-expect-error -- parseurl (Express's own URL reader) ships no types
import parseurlUntyped from 'parseurl';
import fc from 'fast-check';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { rawExchange, type RawResponse } from '../../support/raw-http.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';
import { canonicalTarget, decodePath, under } from '../../../src/proxy/canonical-path.js';
import { joinTargetPath } from '../../../src/proxy/target-path.js';

/** What an upstream saw of one request, read the ways upstream servers read it. */
interface Seen {
  upstream: string;
  method: string;
  /** Node's req.url, byte for byte (latin1). */
  url: string;
  /** Express's req.path (parseurl). */
  expressPath: string;
  /** Express's req.query (its default parser). */
  expressQuery: unknown;
  /** The longest route prefix Express's router (app.use, its defaults) matched, if any. */
  expressRoute: string | undefined;
}

interface RouteUnderTest {
  path: string;
  name: string;
  auth: 'user' | 'none';
  scopes?: string[];
  stripPrefix?: boolean;
  /** The target's own path (joined before the forwarded one). */
  base: string;
  /** The test user lacks the route's scope: the gateway answers 403, the upstream is never called. */
  refused?: boolean;
}

const ROUTES: RouteUnderTest[] = [
  { path: '/api/a', name: 'A', auth: 'user', base: '' },
  { path: '/api/a/admin', name: 'ADMIN', auth: 'user', scopes: ['admin:write'], base: '', refused: true },
  { path: '/api/b', name: 'B', auth: 'user', base: '/base' },
  { path: '/api/b/open', name: 'OPEN', auth: 'none', base: '' },
  { path: '/s/x-y', name: 'S', auth: 'user', stripPrefix: true, base: '' },
  { path: '/api/caf%C3%A9', name: 'CAFE', auth: 'user', base: '' },
];
const parseurl = parseurlUntyped as (req: { url: string }) => { query: string | null } | undefined;
const byLength = [...ROUTES].sort((a, b) => decodePath(b.path).length - decodePath(a.path).length);

const NUM_RUNS = Number(process.env.FUZZ_RUNS ?? 2000);
const SEED = Number(process.env.FUZZ_SEED ?? 20240611);

let stack: Stack;
const upstreams = new Map<string, Upstream>();
const seen: Seen[] = [];
let cookieHeader: string;
let gatewayHost: string;

/** An Express app as an upstream: records how Node and Express read the request, answers 200. */
function recordingApp(name: string): (req: IncomingMessage, res: ServerResponse) => void {
  const app = express();
  app.disable('x-powered-by');
  const matched = new WeakMap<object, string>();
  // Longest first: the first app.use whose prefix matches (Express's own reading: case-blind,
  // non-strict, on parseurl's pathname) names the route Express would run.
  for (const route of byLength) {
    app.use(route.path, (req, _res, next) => {
      if (!matched.has(req)) matched.set(req, route.path);
      next();
    });
  }
  app.use((req, res) => {
    seen.push({ upstream: name, method: req.method, url: req.originalUrl, expressPath: req.path, expressQuery: req.query, expressRoute: matched.get(req) });
    req.resume();
    res.json({ upstream: name });
  });
  return app as unknown as (req: IncomingMessage, res: ServerResponse) => void;
}

beforeAll(async () => {
  for (const route of ROUTES) {
    const upstream = await startUpstream();
    upstream.setHandler(recordingApp(route.name));
    upstreams.set(route.name, upstream);
  }
  stack = await startStack({
    config: {
      logLevel: 'warn',
      routes: ROUTES.map((r) => ({
        path: r.path,
        target: `${(upstreams.get(r.name) as Upstream).url}${r.base}`,
        auth: r.auth,
        ...(r.scopes ? { scopes: r.scopes } : {}),
        ...(r.stripPrefix ? { stripPrefix: true } : {}),
      })),
    },
  });
  const client = new BrowserClient();
  await signIn(client, stack.gateway.url);
  const name = stack.config.derived.sessionCookieName;
  cookieHeader = `${name}=${client.cookies(stack.gateway.url)[name] as string}`;
  gatewayHost = new URL(stack.gateway.url).host;
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await Promise.all([...upstreams.values()].map((u) => u.close()));
});

// ---------------------------------------------------------------------------------------------
// Readings of a received path, each in the gateway's matching space (escapes decoded byte for
// byte, one latin1 char per byte), and the route each names.
// ---------------------------------------------------------------------------------------------

/** Every %XX decoded to its byte; malformed escapes stay as they are. */
function percentDecode(s: string): string {
  return s.replace(/%([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/** RFC 3986 §5.2.4 on segments, `\` read as `/` too (Windows, IIS): the path a resolving server serves. */
function resolveDots(path: string): string {
  const out: string[] = [];
  for (const seg of path.replace(/\\/g, '/').split('/').slice(1)) {
    if (seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  return `/${out.join('/')}`;
}

/** The route a reading names: the longest route prefix it lies under (optionally without regard to case). */
function routeOf(path: string, caseBlind = false): RouteUnderTest | undefined {
  const p = caseBlind ? path.toLowerCase() : path;
  return byLength.find((r) => under(p, caseBlind ? decodePath(r.path).toLowerCase() : decodePath(r.path)));
}

/** A path the upstream received, as the gateway's path space: the target's base taken off, a stripped prefix put back. */
function toGatewaySpace(route: RouteUnderTest, received: string): string | undefined {
  let p = received;
  if (route.base) {
    if (p === route.base) p = '/';
    else if (p.startsWith(`${route.base}/`)) p = p.slice(route.base.length);
    else return undefined;
  }
  if (route.stripPrefix) p = p === '/' ? decodePath(route.path) : decodePath(route.path) + p;
  return p;
}

const pathPart = (url: string) => (url.indexOf('?') === -1 ? url : url.slice(0, url.indexOf('?')));
const queryPart = (url: string) => (url.indexOf('?') === -1 ? undefined : url.slice(url.indexOf('?') + 1));

/** Node's own parser answered before the gateway saw the request (no JSON body). */
const fromNodeParser = (res: RawResponse) => [400, 414, 431].includes(res.status) && res.body.length === 0;

function checkRefusal(res: RawResponse, what: string): void {
  if (fromNodeParser(res)) return;
  expect([what, res.headers.get('cache-control') ?? '']).toEqual([what, expect.stringContaining('no-store')]);
  const body = JSON.parse(res.text) as Record<string, unknown>;
  expect([what, body]).toEqual([what, { error: expect.any(String), error_description: expect.any(String) }]);
}

/**
 * The property for one request target: returns a list of violations (empty when it held), so
 * that fast-check shrinks on any of them.
 */
async function judge(target: string, method = 'GET'): Promise<string[]> {
  seen.length = 0;
  for (const u of upstreams.values()) u.reset();
  const res = await rawExchange(stack.gateway.url, { method, target, headers: { 'x-csrf': '1', cookie: cookieHeader }, deadlineMs: 15_000 });
  const problems: string[] = [];
  lastStatus = res.status;
  if (res.status >= 500) problems.push(`answered ${res.status}: ${res.text.slice(0, 200)}`);
  const canonical = canonicalTarget(target);
  const called = [...upstreams.entries()].filter(([, u]) => u.requests.length > 0).map(([name, u]) => `${name}×${u.requests.length}`);
  if (res.status >= 400) {
    if (called.length > 0) problems.push(`refused with ${res.status} but ${called.join(',')} was called: ${res.text.slice(0, 200)}`);
    try {
      checkRefusal(res, target);
    } catch (err) {
      problems.push(`refusal not in the SPEC shape: ${res.status} ${res.text.slice(0, 200)} (${String(err).slice(0, 200)})`);
    }
    return problems;
  }
  if (res.status !== 200) problems.push(`answered ${res.status}`);
  if (seen.length !== 1 || called.length !== 1) {
    problems.push(`answered ${res.status} with ${seen.length} upstream calls (${called.join(',')})`);
    return problems;
  }
  const call = seen[0] as Seen;
  const route = ROUTES.find((r) => r.name === call.upstream) as RouteUnderTest;
  if (route.refused) problems.push(`the ${route.path} upstream was called, past its scope check`);
  if (typeof canonical !== 'string') {
    problems.push(`forwarded a target the canonicaliser refuses (${canonical.refused})`);
    return problems;
  }
  // The gateway's choice, from its canonical form: the upstream called must be that route's.
  const chosen = routeOf(decodePath(pathPart(canonical)));
  if (chosen !== route) problems.push(`canonical ${pathPart(canonical)} names ${chosen?.path} but ${route.path}'s upstream was called`);
  // What is forwarded is the canonical form.
  const cq = queryPart(canonical);
  const forwardedPath = route.stripPrefix
    ? (() => {
        const segments = route.path.split('/').length - 1;
        const parts = pathPart(canonical).split('/');
        const rest = parts.slice(segments + 1).join('/');
        return parts.length > segments + 1 ? `/${rest}` : '/';
      })()
    : pathPart(canonical);
  const expectedUrl = joinTargetPath(route.base, forwardedPath) + (cq === undefined ? '' : `?${cq}`);
  if (call.url !== expectedUrl) problems.push(`upstream received ${JSON.stringify(call.url)}, the canonical form is ${JSON.stringify(expectedUrl)}`);
  // The query: byte for byte, and parsed alike.
  const sentQuery = queryPart(target);
  if (queryPart(call.url) !== sentQuery) problems.push(`query changed: sent ${JSON.stringify(sentQuery)}, received ${JSON.stringify(queryPart(call.url))}`);
  // The client's own target, read by the same parsers (parseurl takes a fragment off).
  const clientSearch = parseurl({ url: target })?.query;
  const clientParsed = typeof clientSearch === 'string' ? { ...parseQuery(clientSearch) } : {};
  if (JSON.stringify(call.expressQuery) !== JSON.stringify(clientParsed)) {
    problems.push(`Express parsed the query as ${JSON.stringify(call.expressQuery)}, the client's parses as ${JSON.stringify(clientParsed)}`);
  }
  // Every reading of the received path lies under the chosen route and names no other.
  const received = pathPart(call.url);
  const readings: Array<[string, string, boolean]> = [
    ['node req.url', received, false],
    ['express req.path', call.expressPath, false],
    ['express req.path, case-blind', call.expressPath, true],
    ['decoded', percentDecode(received), false],
    ['decoded and resolved', resolveDots(percentDecode(received)), false],
    ['decoded and resolved, case-blind', resolveDots(percentDecode(received)), true],
  ];
  for (const [how, path, caseBlind] of readings) {
    const mapped = toGatewaySpace(route, path);
    if (mapped === undefined) {
      problems.push(`${how}: ${JSON.stringify(path)} escapes the target's base ${route.base}`);
      continue;
    }
    const named = routeOf(mapped, caseBlind);
    // A reading that names no route at all (the upstream's own 404, e.g. Express not decoding
    // an escape the route is written with) confuses nothing; one that names another route does.
    // The decoding readings must stay under the route: they are how the gateway matches.
    if (named !== undefined && named !== route) problems.push(`${how}: ${JSON.stringify(mapped)} names ${named.path}, not ${route.path}`);
    if (named === undefined && !caseBlind && how.startsWith('decoded')) problems.push(`${how}: ${JSON.stringify(mapped)} escapes ${route.path}`);
  }
  if (call.expressRoute !== undefined && call.expressRoute !== route.path && !(route.stripPrefix || route.base)) {
    problems.push(`Express's router ran ${call.expressRoute}'s handlers, not ${route.path}'s`);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// The grammar: request targets biased to the bytes where readings part ways.
// ---------------------------------------------------------------------------------------------

const utf8 = (s: string) => Buffer.from(s, 'utf8').toString('latin1');

const starts = fc.constantFrom(
  '/api/a',
  '/api/a',
  '/api/b',
  '/api/b',
  '/api/a/admin',
  '/api/b/open',
  '/s/x-y',
  '/api/caf%C3%A9',
  '/api/caf%c3%a9',
  `/api/caf${utf8('é')}`,
  '/api',
  '',
  '/API/A',
  '/api/%61',
  '/api/%41',
  '/api/a/ADMIN',
  '/api/a/Admin',
  '/api/b/OPEN',
  '/api/A/admin',
  '/s/x%2Dy',
  '/s/x%2dy',
  '/S/X-Y',
  '/api/a/%61dmin',
  '/api/b/%6Fpen',
);

const pieces = fc.oneof(
  { weight: 30, arbitrary: fc.constantFrom('admin', 'open', 'a', 'b', 'x', 'api', 's', 'x-y', 'ADMIN', 'Admin', 'OPEN', 'users', '1', '~', '-', '_') },
  // Escapes and characters the gateway serves, some of which others read differently.
  {
    weight: 12,
    arbitrary: fc.constantFrom(
      '%61', '%41', '%6f', '%4F', '%7e', '%7E', '%2D', '%5f', '%30', '%20', '%a0', '%A0', '%c0%ae', '%C0%AE', '%e0%80%ae', '%c0%af', '%c3%a9', '%C3%A9',
      '%e9', '%ff', '%21', '%24', '%26', '%27', '%28', '%2B', '%2C', '%3A', '%3D', '%40', '%ef%bc%8e', '%e2%80%a4', '%c4%b0', '%e2%84%aa', '%c5%bf',
      '%ef%bd%81', '%e2%80%8b', '%ef%bb%bf', '%c2%a0', '%c2%85', 'admin.', 'open.', 'admin..', 'admin.json', 'open.xml', 'a.', 'x.y', '.hidden', '...x',
      ',', '!', '$', '&', "'", '(', ')', '*', '+', '=', ':', '@', 'admin%20', 'open%20', 'admin%2E', 'admin%09', 'ADM%C4%B0N', 'adm%C4%B1n', '%e2%84%aadmin',
    ),
  },
  {
    weight: 5,
    arbitrary: fc.constantFrom(
      '%2e', '%2E', '%2e%2e', '.%2E', '%2f', '%2F', '%5c', '%5C', '%25', '%252e', '%252f', '%2525', '%3b', '%3B', '%3f', '%23',
      '%00', '%0a', '%0d', '%09', '%7f', '%u002e', '%', '%4', '%g1', '%%', '%2',
    ),
  },
  { weight: 3, arbitrary: fc.constantFrom('.', '..', '...', '.%20', '%20%20') },
  { weight: 2, arbitrary: fc.constantFrom(';', ';x', '..;', '.;', ';jsessionid=1', 'admin;', 'open;a=b') },
  { weight: 2, arbitrary: fc.constantFrom('\\', '\\..', '..\\', '/', '//', '\\\\') },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      utf8('é'), utf8('İ'), utf8('\u212a'), utf8('ſ'), utf8('ß'), utf8('ａ'), utf8('．'), utf8('\u2024'), utf8('\u200b'), utf8('\ufeff'), utf8('\u00a0'),
      '\xa0', '\xc0\xae', '\xc0\xaf', '\xe0\x80\xae', '\xff', '\x80', '\x85', '\xe9',
      utf8('admın'), utf8('adm\u0130n'), utf8('ADM\u0130N'), utf8('open\u00a0'), 'admin\xa0', 'open\xa0',
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom('\x00', '\t', '\x7f', '\x1f', '"', '<', '>', '{', '|', '}', '^', '`') },
);

// (No raw space: it ends the request target, and Node's parser takes `GET /a/  HTTP/1.1` for `/a/`.)
const segment = fc.oneof({ weight: 12, arbitrary: fc.array(pieces, { minLength: 1, maxLength: 3 }).map((p) => p.join('')) }, { weight: 1, arbitrary: fc.constant('') });

const queryPieces = fc.constantFrom(
  'x=1', 'x=2', 'x', 'y=', '=z', 'a[b]=1', 'a[]=1', 'a.b=1', '__proto__=1', 'constructor=1', '%26=1', 'k=%26', 'k=%3D', 'k=%2B', 'k=+', 'k=a+b',
  'k=%2e%2e%2f', 'k=../..', 'k=/api/b', 'k=%00', 'k=%25', 'k=%', 'k=%zz', 'k=;', 'k=?', 'k=??', 'k=/', 'k=%c3%a9', `k=${utf8('é')}`, 'k=\xa0', 'x=1;y=2', '',
);
const query = fc.array(queryPieces, { minLength: 0, maxLength: 4 }).map((q) => `?${q.join('&')}`);
const fragment = fc.constantFrom('#', '#x', '#/../b', '#?x=1', '#%2e%2e');

/** `arb` once in 1 + `none` times. */
const maybe = (arb: fc.Arbitrary<string>, none: number) => fc.oneof({ weight: none, arbitrary: fc.constant('') }, { weight: 1, arbitrary: arb });

const originForm = fc
  .tuple(starts, fc.array(segment, { minLength: 0, maxLength: 4 }), fc.boolean(), maybe(query, 1), maybe(fragment, 9))
  .map(([start, segs, slash, q, f]) => `${start}${segs.map((s) => `/${s}`).join('')}${slash ? '/' : ''}${q}${f}`)
  .map((t) => (t.startsWith('/') ? t : `/${t}`));

const otherForms = fc.oneof(
  originForm.map((t) => `http://${'HOST'}${t}`),
  originForm.map((t) => `HTTP://HOST${t}`),
  originForm.map((t) => `//HOST${t}`),
  originForm.map((t) => t.slice(1)),
  fc.constantFrom('*', 'HOST', 'HOST:80', '/', '', '?x=1', '#x', '/?', '/#'),
  fc.tuple(fc.constantFrom('/api/a/', '/api/b/', '/s/x-y/'), fc.integer({ min: 100, max: 9000 }), fc.constantFrom('x', '%2e', 'a/', '%41', '\xa0'))
    .map(([p, n, unit]) => p + unit.repeat(n)),
);

const targets = fc.oneof({ weight: 12, arbitrary: originForm }, { weight: 1, arbitrary: otherForms });

const fill = (t: string) => t.replace(/HOST/g, gatewayHost);
const shown = (t: string) => JSON.stringify(t.length > 300 ? `${t.slice(0, 300)}…(${t.length})` : t);

describe('the request target, client → gateway → upstream', () => {
  it('generates targets the gateway serves as well as refuses, and reaches every route', () => {
    const sample = fc.sample(targets, { numRuns: 3000, seed: SEED }).map(fill);
    const served = sample.filter((t) => typeof canonicalTarget(t) === 'string');
    expect(served.length).toBeGreaterThan(sample.length / 5);
    expect(sample.length - served.length).toBeGreaterThan(sample.length / 5);
    for (const route of ROUTES) expect([route.path, served.some((t) => routeOf(decodePath(pathPart(t))) === route)]).toEqual([route.path, true]);
  });

  it('either refuses in the SPEC shape or forwards the canonical form to exactly the matched route, whose upstream reads it there', async () => {
    await fc.assert(
      fc.asyncProperty(targets, async (t) => {
        const target = fill(t);
        const problems = await judge(target);
        const c = canonicalTarget(target);
        const key = `${lastStatus} ${seen[0]?.upstream ?? '-'} ${typeof c === 'string' ? '' : c.refused}`;
        outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
        if (problems.length > 0) throw new Error(`${shown(target)}:\n  ${problems.join('\n  ')}`);
      }),
      { numRuns: NUM_RUNS, seed: SEED, endOnFailure: false, interruptAfterTimeLimit: 40_000 },
    );
    console.log(`request targets: ${[...outcomes.entries()].sort().map(([k, n]) => `${k.trim()}×${n}`).join(', ')}`);
    // Not vacuous: every route that serves the test user was reached, and refusals of every kind came.
    for (const route of ROUTES.filter((r) => !r.refused)) expect(outcomes.get(`200 ${route.name} `) ?? 0).toBeGreaterThan(10);
  }, 120_000);
});
const outcomes = new Map<string, number>();
let lastStatus = 0;
