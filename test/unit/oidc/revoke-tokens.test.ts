/**
 * RFC 7009 revocation of a session's tokens (src/oidc/revocation.ts revokeTokens): openid-client runs
 * for real, only its transport is a function answering what a provider would. The refresh token
 * goes first and alone; then the access token and the extra (resource, exchanged) access tokens
 * at once, each once, at most MAX_EXTRA_REVOCATIONS extras; a JWT the provider cannot revoke is
 * no failure; a failure is counted and reported, never retried.
 *
 * Mutation that fails it (checked by hand): in revokeTokens, drop
 * `.slice(0, MAX_EXTRA_REVOCATIONS)` (a session with many cached tokens then costs a call each).
 */
import * as oidc from 'openid-client';
import type { JWTVerifyGetKey } from 'jose';
import { MAX_EXTRA_REVOCATIONS, revokeTokens } from '../../../src/oidc/revocation.js';
import type { ProviderState } from '../../../src/oidc/client.js';

const ISSUER = 'https://idp.example';

interface Call {
  token: string;
  hint: string | null;
  /** How many calls were open (sent, not answered) when this one was sent. */
  open: number;
}

function providerAnswering(answer: (token: string) => Response | Promise<Response>): { provider: ProviderState; calls: Call[] } {
  const metadata = { issuer: ISSUER, token_endpoint: `${ISSUER}/token`, revocation_endpoint: `${ISSUER}/revoke` };
  const configuration = new oidc.Configuration(metadata, 'bff', 'secret-0123456789');
  const calls: Call[] = [];
  let open = 0;
  configuration[oidc.customFetch] = async (_url, options) => {
    const form = new URLSearchParams(String(options.body));
    const token = form.get('token') ?? '';
    calls.push({ token, hint: form.get('token_type_hint'), open });
    open += 1;
    // Answer on a later turn, so that calls sent together are seen open together.
    await new Promise((resolve) => setImmediate(resolve));
    try {
      return await answer(token);
    } finally {
      open -= 1;
    }
  };
  return { provider: { configuration, metadata, jwks: (async () => { throw new Error('unused'); }) as unknown as JWTVerifyGetKey }, calls };
}

const ok = () => new Response(null, { status: 200 });
const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

it('revokes the refresh token first and alone, then the access and extra tokens at once, each once', async () => {
  const { provider, calls } = providerAnswering(ok);
  const errors: unknown[] = [];
  const failures = await revokeTokens(provider, { accessToken: 'at', refreshToken: 'rt' }, (e) => errors.push(e), ['res-1', 'ex-1', 'res-1', 'at']);
  expect(failures).toBe(0);
  expect(calls[0]).toEqual({ token: 'rt', hint: 'refresh_token', open: 0 });
  expect(calls.slice(1).map((c) => c.token).sort()).toEqual(['at', 'ex-1', 'res-1']);
  expect(calls.slice(1).every((c) => c.hint === 'access_token')).toBe(true);
  // Sent together: the last one went out while the others were still open.
  expect(Math.max(...calls.map((c) => c.open))).toBe(2);
});

it(`sends at most ${MAX_EXTRA_REVOCATIONS} extra tokens`, async () => {
  const { provider, calls } = providerAnswering(ok);
  const extra = Array.from({ length: 40 }, (_, i) => `extra-${i}`);
  await revokeTokens(provider, { accessToken: 'at' }, () => {}, extra);
  expect(calls).toHaveLength(1 + MAX_EXTRA_REVOCATIONS);
});

it('counts and reports failures (never retried), but not a JWT the provider cannot revoke', async () => {
  const { provider, calls } = providerAnswering((token) =>
    token === 'jwt' ? json(400, { error: 'unsupported_token_type' }) : token === 'down' ? json(503, { error: 'temporarily_unavailable' }) : ok(),
  );
  const errors: unknown[] = [];
  const failures = await revokeTokens(provider, { accessToken: 'at', refreshToken: 'rt' }, (e) => errors.push(e), ['jwt', 'down']);
  expect(failures).toBe(1);
  expect(errors).toHaveLength(1);
  expect(calls.filter((c) => c.token === 'down')).toHaveLength(1);
});

it('does nothing against a provider without a revocation endpoint', async () => {
  const { provider, calls } = providerAnswering(ok);
  const bare = { ...provider, metadata: { issuer: ISSUER } };
  expect(await revokeTokens(bare, { accessToken: 'at', refreshToken: 'rt' }, () => {}, ['x'])).toBe(0);
  expect(calls).toHaveLength(0);
});
