/**
 * Provider metadata the gateway will not use. Discovery already refuses a foreign `issuer`
 * (openid-client, OIDC Discovery §4.3); this adds the transport: metadata of an https issuer
 * must name https endpoints only (RFC 8414 §2 and OIDC Discovery §3 require https URLs;
 * RFC 9700 §2.6). An http `jwks_uri` would let anyone on the path swap the keys ID tokens and
 * logout tokens are checked with; an http authorization or token endpoint would leak codes,
 * refresh tokens and the client secret. http is accepted only for a loopback issuer (development
 * and tests), and then only for loopback endpoints.
 */
import { isLoopbackHost } from '../config/schema.js';

/** The metadata fields naming URLs the gateway or the browser calls (beyond `*_endpoint`). */
const URL_FIELDS = new Set(['jwks_uri', 'signed_jwks_uri', 'check_session_iframe']);

function isEndpointField(name: string): boolean {
  return name.endsWith('_endpoint') || URL_FIELDS.has(name);
}

function acceptable(value: string, issuerIsLoopbackHttp: boolean): boolean {
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  if (url.protocol === 'https:') return true;
  return url.protocol === 'http:' && issuerIsLoopbackHttp && isLoopbackHost(url.hostname);
}

/**
 * The names of the endpoint fields (`jwks_uri`, `token_endpoint`, `mtls_endpoint_aliases.x`...)
 * whose URL the gateway must not use under `issuer`; empty when all are acceptable.
 */
export function insecureEndpoints(issuer: URL, metadata: Readonly<Record<string, unknown>>): string[] {
  const issuerIsLoopbackHttp = issuer.protocol === 'http:' && isLoopbackHost(issuer.hostname);
  const refused: string[] = [];
  const check = (name: string, value: unknown) => {
    if (value === undefined || value === null) return;
    // An endpoint that is not a string is refused too: new URL() stringified `["http://..."]`
    // into a URL this check never saw (the key set fetched over cleartext), and one that did
    // not stringify failed every login or logout with a 500.
    if (typeof value !== 'string' || !acceptable(value, issuerIsLoopbackHttp)) refused.push(name);
  };
  for (const [name, value] of Object.entries(metadata)) {
    if (isEndpointField(name)) check(name, value);
  }
  // RFC 8705 §5: the mTLS aliases are endpoints too.
  const aliases = metadata.mtls_endpoint_aliases;
  if (aliases !== null && typeof aliases === 'object' && !Array.isArray(aliases)) {
    for (const [name, value] of Object.entries(aliases)) check(`mtls_endpoint_aliases.${name}`, value);
  }
  return refused;
}
