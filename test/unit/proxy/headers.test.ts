/**
 * The header rules of proxied calls (pure).
 *
 * Mutation checks (each by hand, once):
 *  - src/proxy/headers.ts compileRequestHeaderStrip: `const out: IncomingHttpHeaders = {}` →
 *    `= headers` (strip in place, as 0.5.0 did) → "builds a fresh object…" fails.
 *  - src/proxy/headers.ts stripCookies: drop `pair.length > 0 &&` → the Cookie test fails.
 */
import { compileTrust } from '../../../src/proxy/trust.js';
import { compileRequestHeaderStrip, connectionNominated, forwardingHeaders, responseHeaders, stripCookies } from '../../../src/proxy/headers.js';

const ours = (name: string) => name === 'bff' || name.startsWith('bff-login.');

describe('proxied request headers', () => {
  it("removes only the gateway's cookies from the Cookie header", () => {
    expect(stripCookies('a=1; bff=s%3Asecret; b=2; bff-login.abc=x', ours)).toBe('a=1; b=2');
    expect(stripCookies('bff=s%3Asecret', ours)).toBeUndefined();
    expect(stripCookies(undefined, ours)).toBeUndefined();
    expect(stripCookies('bffx=1', ours)).toBe('bffx=1');
    expect(stripCookies(';; a=1 ;bff=x; ;b ', ours)).toBe('a=1; b');
    expect(stripCookies('bff=x; bff-login.t=y', ours)).toBeUndefined();
  });

  it('drops browser-sent forwarding headers and sets its own when the proxy is not trusted', () => {
    const out = forwardingHeaders({
      headers: { 'x-forwarded-for': '6.6.6.6', forwarded: 'for=6.6.6.6', 'x-real-ip': '6.6.6.6' },
      remoteAddress: '10.0.0.5',
      trust: compileTrust(false),
      publicProtocol: 'https',
      publicHost: 'app.example.com',
    });
    expect(out).toMatchObject({
      forwarded: undefined,
      'x-real-ip': undefined,
      'x-forwarded-for': '10.0.0.5',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'app.example.com',
    });
  });

  it("extends a trusted load balancer's forwarding chain", () => {
    const out = forwardingHeaders({
      headers: { 'x-forwarded-for': '1.2.3.4', 'x-forwarded-proto': 'https' },
      remoteAddress: '10.0.0.1',
      trust: compileTrust(true),
      publicProtocol: 'https',
      publicHost: 'app.example.com',
    });
    expect(out).toEqual({ 'x-forwarded-for': '1.2.3.4, 10.0.0.1', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com' });
  });

  // Fails if, in proxy/headers.ts forwardingHeaders, the FORWARDING drop loop is made to run
  // only for an untrusted peer (`if (!input.trust(peer, 0)) for (...)`, as before).
  it('behind a trusted load balancer, sets the origin from publicUrl and drops the forwarding headers a browser wrote through it', () => {
    const out = forwardingHeaders({
      // A load balancer that appends X-Forwarded-For and passes the rest on as the browser wrote them.
      headers: {
        'x-forwarded-for': '6.6.6.6, 1.2.3.4',
        'x-forwarded-host': 'evil.example',
        'x-forwarded-proto': 'http',
        'x-forwarded-port': '8443',
        'x-forwarded-prefix': '/admin',
        forwarded: 'for=6.6.6.6;host=evil.example;proto=http',
        'x-real-ip': '6.6.6.6',
      },
      remoteAddress: '10.0.0.1',
      trust: compileTrust(true),
      publicProtocol: 'https',
      publicHost: 'app.example.com',
    });
    // Strict: a header to drop is a key with an undefined value (upstream.ts skips it), not a missing key.
    expect(out).toStrictEqual({
      'x-forwarded-for': '6.6.6.6, 1.2.3.4, 10.0.0.1',
      'x-forwarded-host': 'app.example.com',
      'x-forwarded-proto': 'https',
      'x-forwarded-port': undefined,
      'x-forwarded-prefix': undefined,
      forwarded: undefined,
      'x-real-ip': undefined,
    });
  });

  // Fails if, in proxy/headers.ts forwardingHeaders, `const peer = remote` (no normaliseAddress).
  it('names an IPv4 peer of a dual-stack socket as IPv4 in X-Forwarded-For', () => {
    const input = { publicProtocol: 'https', publicHost: 'app.example.com' };
    expect(forwardingHeaders({ ...input, headers: { 'x-forwarded-for': '1.2.3.4' }, remoteAddress: '::ffff:10.0.0.1', trust: compileTrust(['10.0.0.0/8']) })['x-forwarded-for']).toBe('1.2.3.4, 10.0.0.1');
    expect(forwardingHeaders({ ...input, headers: {}, remoteAddress: '::FFFF:10.0.0.1', trust: compileTrust(false) })['x-forwarded-for']).toBe('10.0.0.1');
    expect(forwardingHeaders({ ...input, headers: {}, remoteAddress: '::1', trust: compileTrust(false) })['x-forwarded-for']).toBe('::1');
  });

  it('treats headers named in Connection as hop-by-hop', () => {
    expect(connectionNominated({ connection: 'keep-alive, X-Foo, x-bar' })).toEqual(['x-foo', 'x-bar']);
    expect(connectionNominated({})).toEqual([]);
  });

  it("drops upstream Set-Cookie headers that would overwrite the gateway's cookies", () => {
    expect(responseHeaders(['Set-Cookie', 'bff=attacker; Path=/', 'Set-Cookie', 'theirs=1; Path=/'], ours)).toEqual(['Set-Cookie', 'theirs=1; Path=/']);
    // Nameless: a browser that keeps it sends `bff=attacker` back. Fails if isOursOrNameless
    // no longer drops an empty name (`name === '' ||` removed).
    expect(responseHeaders(['Set-Cookie', '=bff=attacker; Path=/api', 'Set-Cookie', ' =x', 'Set-Cookie', 'theirs=1'], ours)).toEqual(['Set-Cookie', 'theirs=1']);
  });
});

describe('hop-by-hop and identity headers', () => {
  // Expect: fails if, in proxy/headers.ts compileRequestHeaderStrip, `...MET_BY_GATEWAY, ` is removed;
  // rewrites: fails if `'x-forwarded-uri',` (or any other entry) leaves IDENTITY_REQUEST_HEADERS.
  it('removes hop-by-hop, Proxy-*, Expect, identity and configured headers, and what Connection names, keeping framing', () => {
    const headers: Record<string, string | string[] | undefined> = {
      host: 'gw.example',
      connection: 'close, Authorization, X-Forwarded-For, x-private, content-length, transfer-encoding, host',
      'keep-alive': 'timeout=5',
      te: 'trailers',
      trailer: 'x-checksum',
      upgrade: 'h2c',
      'proxy-authorization': 'Basic eA==',
      'proxy-connection': 'keep-alive',
      authorization: 'Bearer from-browser',
      'x-forwarded-for': '6.6.6.6',
      'x-private': '1',
      'content-length': '3',
      'transfer-encoding': 'chunked',
      'x-original-url': '/admin',
      'x-rewrite-url': '/admin',
      'x-forwarded-uri': '/admin',
      'x-original-uri': '/admin',
      'x-forwarded-path': '/admin',
      'x-envoy-original-path': '/admin',
      'x-forwarded-scheme': 'https',
      'x-forwarded-ssl': 'on',
      'x-forwarded-server': 'evil.example',
      'x-original-host': 'evil.example',
      'x-host': 'evil.example',
      'true-client-ip': '1.1.1.1',
      'x-client-ip': '1.1.1.1',
      'cf-connecting-ip': '1.1.1.1',
      'x-cluster-client-ip': '1.1.1.1',
      'fastly-client-ip': '1.1.1.1',
      'x-http-method-override': 'DELETE',
      'x-http-method': 'DELETE',
      'x-method-override': 'DELETE',
      'x-internal-user': 'admin',
      expect: '100-continue',
      accept: 'application/json',
      'x-csrf': '1',
    };
    expect(compileRequestHeaderStrip(['X-Internal-User'])(headers)).toEqual({ host: 'gw.example', connection: 'keep-alive', 'content-length': '3', 'transfer-encoding': 'chunked', accept: 'application/json', 'x-csrf': '1' });
  });

  it("builds a fresh object and leaves the request's own headers as they came", () => {
    const source = { host: 'gw.example', connection: 'close', authorization: 'Bearer from-browser', 'x-original-url': '/admin', accept: '*/*' };
    const before = { ...source };
    const out = compileRequestHeaderStrip()(source, (name) => name === 'authorization');
    expect(out).toEqual({ host: 'gw.example', connection: 'keep-alive', accept: '*/*' });
    expect(out).not.toBe(source);
    expect(source).toEqual(before);
  });

  it("replaces the browser's Connection with the gateway's own keep-alive, and leaves a plain request alone", () => {
    const plain = { host: 'gw.example', connection: 'keep-alive', accept: '*/*', cookie: 'a=1' };
    expect(compileRequestHeaderStrip()(plain)).toEqual({ host: 'gw.example', connection: 'keep-alive', accept: '*/*', cookie: 'a=1' });
    const closing = { host: 'gw.example', connection: 'close' };
    expect(compileRequestHeaderStrip()(closing)).toEqual({ host: 'gw.example', connection: 'keep-alive' });
    const named = { connection: 'Connection, x-a', 'x-a': '1' };
    expect(compileRequestHeaderStrip()(named)).toEqual({ connection: 'keep-alive' });
  });

  it("drops the upstream's hop-by-hop response headers and what its Connection names, in order and case", () => {
    const raw = [
      'Content-Type', 'text/plain',
      'Connection', 'keep-alive, X-Hop',
      'Keep-Alive', 'timeout=5',
      'Transfer-Encoding', 'chunked',
      'Trailer', 'X-Sum',
      'TE', 'trailers',
      'Upgrade', 'h2c',
      'Proxy-Authenticate', 'Basic',
      'Proxy-Connection', 'keep-alive',
      'X-Hop', 'secret',
      'Set-Cookie', 'bff=evil',
      'Set-Cookie', 'theirs=1',
      'X-Kept', 'yes',
    ];
    expect(responseHeaders(raw, ours)).toEqual(['Content-Type', 'text/plain', 'Set-Cookie', 'theirs=1', 'X-Kept', 'yes']);
  });

  // Fails if 'clear-site-data' (or any name below) leaves DROPPED_RESPONSE in src/proxy/headers.ts:
  // an upstream cleared the session cookie without ending the session, undid the origin's HSTS,
  // or had the proxy in front of the gateway serve an internal location.
  it('drops what speaks for the whole origin or the front proxy; keeps what only tunes it', () => {
    const raw = [
      'Clear-Site-Data', '"cookies", "storage"',
      'Strict-Transport-Security', 'max-age=0',
      'X-Accel-Redirect', '/internal/secrets',
      'X-Sendfile', '/etc/passwd',
      'X-Lighttpd-Send-File', '/etc/passwd',
      'X-LiteSpeed-Location', '/internal',
      'NEL', '{"report_to":"up","max_age":31536000,"success_fraction":1}',
      'Report-To', '{"group":"up","max_age":31536000,"endpoints":[{"url":"https://up.example/r"}]}',
      'Reporting-Endpoints', 'up="https://up.example/r"',
      'Alt-Svc', 'h2="up.example:443"',
      'Service-Worker-Allowed', '/',
      'X-Accel-Buffering', 'no',
      'Content-Type', 'text/event-stream',
    ];
    expect(responseHeaders(raw, ours)).toEqual(['X-Accel-Buffering', 'no', 'Content-Type', 'text/event-stream']);
  });
});
