/**
 * What a refused refresh or client-credentials grant becomes, for every kind of answer a token
 * endpoint gives: openid-client runs for real, only its transport is a function (customFetch)
 * answering what a provider would.
 */
import * as oidc from 'openid-client';
import type { JWTVerifyGetKey } from 'jose';
import { classifyGrantFailure, describeProviderError } from '../../../src/oidc/errors.js';
import { clientCredentials, refreshTokens } from '../../../src/oidc/grants.js';
import type { ProviderState } from '../../../src/oidc/client.js';
import { GatewayError } from '../../../src/errors.js';

const ISSUER = 'https://idp.example';

function providerAnswering(answer: () => Response | Promise<Response>): ProviderState {
  const metadata = { issuer: ISSUER, token_endpoint: `${ISSUER}/token` };
  const configuration = new oidc.Configuration(metadata, 'bff', 'secret-0123456789');
  configuration[oidc.customFetch] = async () => answer();
  return { configuration, metadata, jwks: (async () => { throw new Error('unused'); }) as unknown as JWTVerifyGetKey };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

async function refreshError(answer: () => Response | Promise<Response>): Promise<GatewayError> {
  const err = await refreshTokens(providerAnswering(answer), { accessToken: 'a', refreshToken: 'r' }, 'alice').then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof GatewayError)) throw new Error(`expected a GatewayError, got ${String(err)}`);
  return err;
}

describe('a refused refresh', () => {
  it.each<[string, () => Response]>([
    ['400 invalid_grant', () => json(400, { error: 'invalid_grant' })],
    ['400 with no body at all', () => new Response(null, { status: 400 })],
    ['400 with an HTML page', () => new Response('<html>Bad Request</html>', { status: 400, headers: { 'content-type': 'text/html' } })],
    ['400 with JSON that is not an OAuth error', () => json(400, { message: 'nope' })],
    ['400 invalid_request', () => json(400, { error: 'invalid_request' })],
    ['400 unauthorized_client', () => json(400, { error: 'unauthorized_client' })],
  ])('%s ends the session (login_required)', async (_name, answer) => {
    const err = await refreshError(answer);
    expect(err.code).toBe('login_required');
    expect(classifyGrantFailure(err)).toBe('grant_ended');
  });

  it.each<[string, () => Response | Promise<Response>, string]>([
    ['401 invalid_client', () => json(401, { error: 'invalid_client' }), 'client_rejected'],
    ['400 invalid_client', () => json(400, { error: 'invalid_client' }), 'client_rejected'],
    ['401 with a Basic challenge and no body', () => new Response(null, { status: 401, headers: { 'www-authenticate': 'Basic realm="idp"' } }), 'client_rejected'],
    ['401 challenge naming invalid_client', () => new Response(null, { status: 401, headers: { 'www-authenticate': 'Basic error="invalid_client"' } }), 'client_rejected'],
    ['400 invalid_target (a route resource the grant lacks)', () => json(400, { error: 'invalid_target' }), 'request_refused'],
    ['400 invalid_scope', () => json(400, { error: 'invalid_scope' }), 'request_refused'],
    ['503 with no body', () => new Response(null, { status: 503 }), 'transient'],
    ['500 with an HTML page', () => new Response('<h1>oops</h1>', { status: 500, headers: { 'content-type': 'text/html' } }), 'transient'],
    ['503 temporarily_unavailable', () => json(503, { error: 'temporarily_unavailable' }), 'transient'],
    ['400 temporarily_unavailable', () => json(400, { error: 'temporarily_unavailable' }), 'transient'],
    ['429 with no body', () => new Response(null, { status: 429 }), 'transient'],
    ['200 that is not JSON', () => new Response('<html>', { status: 200, headers: { 'content-type': 'text/html' } }), 'transient'],
    [
      'a network error',
      () => {
        throw new TypeError('fetch failed');
      },
      'transient',
    ],
  ])('%s keeps the session (token_refresh_failed)', async (_name, answer, failure) => {
    const err = await refreshError(answer);
    expect(err.code).toBe('token_refresh_failed');
    expect(classifyGrantFailure(err)).toBe(failure);
  });

  it('counts a refresh already decided as login_required (e.g. a changed subject) as an ended grant', () => {
    expect(classifyGrantFailure(new GatewayError('login_required'))).toBe('grant_ended');
    expect(classifyGrantFailure(new GatewayError('provider_unavailable'))).toBe('transient');
  });

  it('describes a non-JSON answer by its status for the log, without the body', async () => {
    const err = await refreshError(() => new Response('secret-looking-body', { status: 400, headers: { 'content-type': 'text/plain' } }));
    // oauth4webapi reads a 4xx body only when it is application/json: anything else (an empty
    // body included) is OAUTH_RESPONSE_IS_NOT_JSON, with the Response as the cause.
    expect(describeProviderError(err)).toBe('OAUTH_RESPONSE_IS_NOT_JSON (HTTP 400)');
    expect(describeProviderError(await refreshError(() => json(400, { message: 'x' })))).toBe('OAUTH_RESPONSE_IS_NOT_CONFORM (HTTP 400)');
    expect(describeProviderError(await refreshError(() => json(401, { error: 'invalid_client' })))).toBe('invalid_client (HTTP 401)');
  });
});

describe('a refused client-credentials grant', () => {
  it.each<[string, () => Response]>([
    ['400 with no body', () => new Response(null, { status: 400 })],
    ['400 invalid_grant', () => json(400, { error: 'invalid_grant' })],
    ['401 invalid_client', () => json(401, { error: 'invalid_client' })],
    ['503', () => new Response(null, { status: 503 })],
  ])('%s is token_refresh_failed: there is no session to end', async (_name, answer) => {
    const err = await clientCredentials(providerAnswering(answer), {}).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe('token_refresh_failed');
  });
});
