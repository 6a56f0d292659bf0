/**
 * Every header rule holds in every spelling a CGI-style upstream (RFC 3875 §4.1.18: WSGI, Rack,
 * PHP) reads alike, `-` or `_`: the incoming names were judged with `_` read as `-` while the
 * rules they were judged against kept the spelling they were written in (found by review). So a
 * `server.stripRequestHeaders` entry written with `_` stopped stripping, a `Connection` token
 * with `_` kept its header, and an API-key route whose header is written `X_Api_Key` forwarded
 * the browser's `x-api-key` beside the gateway's key (the browser's read first upstream).
 *
 * Fails if src/proxy/headers.ts compiles the rules as written (`headerKey(h.toLowerCase())` →
 * `h.toLowerCase()`: the first; `.map(headerKey)` removed: the second), or src/proxy/outgoing.ts
 * compares the credential header as written (`headerKey(credential.header)` →
 * `credential.header`: the third).
 */
import type http from 'node:http';
import { routeSchema } from '../../../src/config/schema.js';
import { compileRequestHeaderStrip } from '../../../src/proxy/headers.js';
import { createOutgoing } from '../../../src/proxy/outgoing.js';
import { compileRoutes } from '../../../src/proxy/routes.js';
import { compileTrust } from '../../../src/proxy/trust.js';

it('strips a server.stripRequestHeaders entry written with _ in both spellings', () => {
  const strip = compileRequestHeaderStrip(['X_Custom_Secret']);
  expect(strip({ 'x_custom_secret': 'a', 'x-custom-secret': 'b', accept: '*/*' })).toEqual({ accept: '*/*' });
});

it('drops a header the Connection names with _, in both spellings', () => {
  const strip = compileRequestHeaderStrip();
  expect(strip({ connection: 'x_hop', 'x_hop': 'a', 'x-hop': 'b', accept: '*/*' })).toEqual({ connection: 'keep-alive', accept: '*/*' });
});

it("forwards only the gateway's API key when the route's header is written with _", () => {
  const { routes } = compileRoutes([routeSchema.parse({ path: '/key', target: 'http://up.internal', auth: 'apiKey', apiKey: { header: 'X_Api_Key', value: 'route-key' } })]);
  const outgoing = createOutgoing({
    route: routes[0]!,
    target: new URL('http://up.internal'),
    trust: compileTrust(false),
    publicUrl: new URL('https://app.example'),
    isGatewayCookie: () => false,
  });
  const req = { url: '/key/x', method: 'GET', headers: { 'x-api-key': 'browser-key', accept: '*/*' }, socket: { remoteAddress: '203.0.113.9' } } as unknown as http.IncomingMessage;
  outgoing.prepare(req, { header: 'x_api_key', value: 'route-key' });
  const keys = Object.entries(req.headers).filter(([name]) => /^x[-_]api[-_]key$/.test(name));
  expect(keys).toEqual([['x_api_key', 'route-key']]);
});
