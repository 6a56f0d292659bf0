/**
 * The provider calls as child spans (tracing on only): openid-client's customFetch hook sees
 * every request it makes after discovery (token endpoint for every grant, revocation, PAR...),
 * so no flow needs to know about tracing. The span says which endpoint, which grant type (our
 * own parameter, from a fixed list) and the answer's status; never the URL's query, the body's
 * other parameters or any header. The provider gets the span's traceparent.
 */
import * as oidc from 'openid-client';
import type { SpanAttributes, Tracing } from '../observability/tracing.js';

/** Grant types the gateway sends; anything else is named `other` (the body is never echoed). */
const GRANT_TYPES = new Set([
  'authorization_code',
  'refresh_token',
  'client_credentials',
  'urn:ietf:params:oauth:grant-type:token-exchange',
]);

const withoutQuery = (url: string | undefined) => (url === undefined ? undefined : url.split('?')[0]);

/** `next`: the fetch to trace (another customFetch already set, else the global fetch). */
export function tracedFetch(
  tracing: Tracing,
  metadata: Readonly<oidc.ServerMetadata>,
  next: oidc.CustomFetch = (url, options) => fetch(url, options as RequestInit),
): oidc.CustomFetch {
  const token = withoutQuery(metadata.token_endpoint);
  const revocation = withoutQuery(metadata.revocation_endpoint);
  const par = withoutQuery(metadata.pushed_authorization_request_endpoint);

  function describe(url: string, options: oidc.CustomFetchOptions): { name: string; attributes: SpanAttributes } {
    const endpoint = withoutQuery(url);
    const method = { 'http.request.method': options.method === 'GET' ? 'GET' : options.method === 'POST' ? 'POST' : '_OTHER' };
    if (endpoint === token) {
      const grant = options.body instanceof URLSearchParams ? options.body.get('grant_type') : null;
      return { name: 'oidc.token', attributes: { ...method, 'oauth.grant_type': grant !== null && GRANT_TYPES.has(grant) ? grant : 'other' } };
    }
    if (endpoint === revocation) return { name: 'oidc.revoke', attributes: method };
    if (endpoint === par) return { name: 'oidc.par', attributes: method };
    return { name: 'oidc.request', attributes: method };
  }

  return (url, options) => {
    const { name, attributes } = describe(url, options);
    return tracing.inSpan(
      name,
      { kind: 'client', attributes },
      async (span) => {
        tracing.inject(span, options.headers);
        const response = await next(url, options);
        span.setAttributes({ 'http.response.status_code': response.status });
        if (response.status >= 400) span.fail(`http_${response.status}`);
        return response;
      },
      (err) => ((err as { name?: unknown }).name === 'TimeoutError' || (err as { name?: unknown }).name === 'AbortError' ? 'timeout' : 'network_error'),
    );
  };
}
