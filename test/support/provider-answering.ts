/**
 * A provider for unit tests of token requests: openid-client runs for real, only its transport
 * is a function answering what a provider would (and the DPoP proofs it was sent are kept).
 */
import * as oidc from 'openid-client';
import type { JWTVerifyGetKey } from 'jose';
import type { ProviderState } from '../../src/oidc/client.js';

export const ISSUER = 'https://idp.example';

export const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

export function providerAnswering(answer: (proof: string | null) => Response): { provider: ProviderState; proofs: (string | null)[] } {
  const metadata = { issuer: ISSUER, token_endpoint: `${ISSUER}/token`, dpop_signing_alg_values_supported: ['ES256'] };
  const configuration = new oidc.Configuration(metadata, 'bff', 'secret-0123456789');
  const proofs: (string | null)[] = [];
  configuration[oidc.customFetch] = async (_url, options) => {
    const proof = new Headers(options.headers as ConstructorParameters<typeof Headers>[0]).get('dpop');
    proofs.push(proof);
    return answer(proof);
  };
  return { provider: { configuration, metadata, jwks: (async () => { throw new Error('unused'); }) as unknown as JWTVerifyGetKey }, proofs };
}
