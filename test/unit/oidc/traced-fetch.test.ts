/**
 * Provider calls as spans (oidc/traced-fetch.ts): the span is named by the endpoint and the
 * grant type from a fixed list, the provider gets its traceparent, and the call goes through
 * the fetch that was already configured (DPoP's nonce reader), never around it.
 *
 * Mutation that fails it: in src/oidc/traced-fetch.ts, call the global `fetch(url, options)`
 * instead of `next(url, options)` ("goes through the fetch already configured" fails).
 */
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import type * as oidc from 'openid-client';
import { tracedFetch } from '../../../src/oidc/traced-fetch.js';
import { createTracing, type Tracing } from '../../../src/observability/tracing.js';

const metadata = {
  issuer: 'https://idp.example',
  token_endpoint: 'https://idp.example/token',
  revocation_endpoint: 'https://idp.example/revoke',
} as oidc.ServerMetadata;

let exporter: InMemorySpanExporter;
let tracing: Tracing;
beforeEach(async () => {
  exporter = new InMemorySpanExporter();
  tracing = await createTracing({ trustIncoming: false, serviceName: 'bff-gateway', sampleRatio: 1 }, { exporter });
});
afterEach(() => tracing.shutdown());

const options = (body: URLSearchParams): oidc.CustomFetchOptions =>
  ({ body, headers: { accept: 'application/json' }, method: 'POST', redirect: 'manual' }) as oidc.CustomFetchOptions;

describe('tracedFetch', () => {
  it('goes through the fetch already configured, with the span’s traceparent, and names the grant', async () => {
    const seen: Array<{ url: string; headers: Record<string, string> }> = [];
    const next: oidc.CustomFetch = async (url, o) => {
      seen.push({ url, headers: { ...o.headers } });
      return new Response('{}', { status: 200, headers: { 'dpop-nonce': 'n-1' } });
    };
    const traced = tracedFetch(tracing, metadata, next);
    const response = await traced('https://idp.example/token', options(new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'rt-5ecret' })));
    expect(response.headers.get('dpop-nonce')).toBe('n-1');
    await traced('https://idp.example/revoke', options(new URLSearchParams({ token: 'rt-5ecret' })));
    await tracing.flush();
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => [s.name, s.attributes['oauth.grant_type'], s.attributes['http.response.status_code']])).toEqual([
      ['oidc.token', 'refresh_token', 200],
      ['oidc.revoke', undefined, 200],
    ]);
    expect(seen[0]?.headers.traceparent).toBe(`00-${spans[0]?.spanContext().traceId}-${spans[0]?.spanContext().spanId}-01`);
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain('5ecret');
  });

  it('names an unknown grant type "other" and a failed answer by its status', async () => {
    const traced = tracedFetch(tracing, metadata, async () => new Response('{}', { status: 400 }));
    await traced('https://idp.example/token', options(new URLSearchParams({ grant_type: 'urn:attacker:<script>' })));
    await tracing.flush();
    const [span] = exporter.getFinishedSpans();
    expect([span?.attributes['oauth.grant_type'], span?.attributes['error.type'], span?.status.code]).toEqual(['other', 'http_400', 2]);
  });
});
