/**
 * The HTTP side of step-up: loginUrl's returnTo from the Referer (same-origin path only), and the
 * listener (for `/auth/events`) told of each step_up_required with the session it concerns.
 *
 * Mutation that fails this file: in src/http/step-up.ts returnToFrom, change
 * `if (!url || url.origin !== publicOrigin) return '/';` to `if (!url) return '/';`.
 * And: in tell(), drop `if (last !== undefined && now - last < STEP_UP_TELL_EVERY_MS) return;`
 * → "tells a session of the same ask once per 10 s" fails.
 */
import { parseConfig } from '../../../src/config/load.js';
import { GatewayError } from '../../../src/errors.js';
import { createStepUp, returnToFrom, STEP_UP_TELL_EVERY_MS } from '../../../src/http/step-up.js';
import type { LoadedSession } from '../../../src/proxy/bearer.js';
import { compileRoute } from '../../../src/proxy/routes.js';
import type { IncomingMessage } from 'node:http';
import { randomBytes } from 'node:crypto';

const ORIGIN = 'https://app.example.com';
const config = parseConfig(
  {
    server: { publicUrl: ORIGIN, authPath: '/bff' },
    oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientSecret: 'top-secret-value', clockToleranceSeconds: 0 },
    session: { secrets: [randomBytes(30).toString('base64')], encryptionKeys: [randomBytes(32).toString('base64')] },
    routes: [{ path: '/api/pay', target: 'http://up:1', stepUp: { acr: ['urn:mfa'] } }],
  },
  { env: {} },
);
const route = compileRoute(config.routes[0] as (typeof config.routes)[number]);
const request = (referer?: string) => ({ headers: referer ? { referer } : {} }) as IncomingMessage;
const session = (acr?: string): LoadedSession => ({ digest: 'd1', auth: { handle: 'h', sub: 's', iss: 'i', claims: {}, scopes: [], createdAt: 0, ...(acr ? { acr } : {}) }, tokens: { v: 1, sealed: 'x' } });

describe('returnToFrom', () => {
  it.each([
    [`${ORIGIN}/orders/7?tab=pay#x`, '/orders/7'],
    [`${ORIGIN}`, '/'],
    ['https://evil.example/orders', '/'],
    ['http://app.example.com/orders', '/'],
    [`${ORIGIN}//evil.example/x`, '/'],
    [`${ORIGIN}/%2F%2Fevil.example`, '/'],
    ['not a url', '/'],
    [undefined, '/'],
    [`${ORIGIN}/${'a'.repeat(5000)}`, '/'],
  ])('%s → %s', (referer, expected) => {
    expect(returnToFrom(referer, ORIGIN)).toBe(expected);
  });
});

describe('createStepUp', () => {
  it('throws step_up_required for an unmet route and tells the listener which session', () => {
    const events: unknown[] = [];
    const stepUp = createStepUp({ config, clock: () => 0, sessionDigestOf: () => 'from-cookie', listener: (e) => events.push(e) });
    let thrown: unknown;
    try {
      stepUp.checkRoute(request(`${ORIGIN}/pay`), route, session('urn:pwd'));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(GatewayError);
    const body = (thrown as GatewayError).toBody();
    expect(body).toMatchObject({ error: 'step_up_required', acr_values: 'urn:mfa', max_age: null, loginUrl: '/bff/login?acr_values=urn%3Amfa&returnTo=%2Fpay' });
    expect(events).toEqual([{ sessionDigest: 'd1', challenge: { acr_values: 'urn:mfa', max_age: null, loginUrl: body.loginUrl } }]);

    expect(() => stepUp.checkRoute(request(), route, session('urn:mfa'))).not.toThrow();
    expect(events).toHaveLength(1);
  });

  it("maps an upstream challenge, naming the session of the request's cookie", () => {
    const events: { sessionDigest: string | undefined }[] = [];
    const stepUp = createStepUp({ config, clock: () => 0, sessionDigestOf: () => 'from-cookie', listener: (e) => events.push(e) });
    expect(stepUp.fromUpstream(request(), 'Bearer error="invalid_token"', 'bearer')).toBeUndefined();
    const error = stepUp.fromUpstream(request(), 'Bearer error="insufficient_user_authentication", max_age=0', 'bearer');
    expect(error?.toBody()).toMatchObject({ error: 'step_up_required', max_age: 0, loginUrl: '/bff/login?max_age=0&returnTo=%2F' });
    expect(events.map((e) => e.sessionDigest)).toEqual(['from-cookie']);
  });

  it('tells a session of the same ask once per 10 s, and of another ask or session at once', () => {
    let now = 0;
    const events: { sessionDigest: string | undefined; challenge: { acr_values: string | null; max_age: number | null } }[] = [];
    const stepUp = createStepUp({ config, clock: () => now, sessionDigestOf: () => 'from-cookie', listener: (e) => events.push(e) });
    const refuse = (s: LoadedSession, referer?: string) => expect(() => stepUp.checkRoute(request(referer), route, s)).toThrow(GatewayError);
    refuse(session('urn:pwd'));
    // Every call is still refused; the listener (one PUBLISH each) hears of the first only.
    refuse(session('urn:pwd'), `${ORIGIN}/other-page`);
    now += STEP_UP_TELL_EVERY_MS - 1;
    refuse(session('urn:pwd'));
    expect(events).toHaveLength(1);
    refuse({ ...session('urn:pwd'), digest: 'd2' });
    expect(() => stepUp.fromUpstream(request(), 'Bearer error="insufficient_user_authentication", max_age=0', 'bearer')).not.toThrow();
    expect(events.map((e) => e.sessionDigest)).toEqual(['d1', 'd2', 'from-cookie']);
    now += 1;
    refuse(session('urn:pwd'));
    expect(events.map((e) => e.sessionDigest)).toEqual(['d1', 'd2', 'from-cookie', 'd1']);
  });

  it('answers step_up_required even when the listener throws', () => {
    const stepUp = createStepUp({ config, clock: () => 0, sessionDigestOf: () => undefined, listener: () => { throw new Error('bus down'); } });
    expect(stepUp.fromUpstream(request(), 'Bearer error="insufficient_user_authentication"', 'bearer')?.code).toBe('step_up_required');
  });
});
