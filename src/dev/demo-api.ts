/**
 * The demo API (SPEC §1): a resource server that trusts nothing but a valid JWT access token
 * and answers with what it saw, so the demo and the tests can prove what the gateway attached.
 *
 * Standalone on purpose (node:http and jose only): it plays a third-party upstream, and must
 * not share code with the gateway it is checking.
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import { createDpopChecker, type DpopCheckerOptions } from './demo-api-dpop.js';
import { bearerCredentials, describeTokenError, isTokenError, splitScopes, stringClaim, tokenScopes } from './demo-api-tokens.js';

export interface DemoApiOptions {
  issuer: string;
  audience: string;
  /** Space-separated scopes every `/api/` call needs. */
  requiredScope: string;
  /** Default: the `jwks_uri` from `<issuer>/.well-known/openid-configuration`. */
  jwksUri?: string;
  clockToleranceSeconds?: number;
  /**
   * Further audiences accepted (e.g. a token-exchange target, RFC 8693), each with the
   * space-separated scopes its tokens need instead of `requiredScope`.
   */
  otherAudiences?: Record<string, string>;
  /** RFC 9449: `Authorization: DPoP` is always accepted with a valid proof; these tune the checks. */
  dpop?: DpopCheckerOptions;
}

export interface DemoApi {
  handler: (req: IncomingMessage, res: ServerResponse) => void;
  listen(port: number, host?: string): Promise<{ port: number; close(): Promise<void> }>;
}

export interface DemoApiAnswer {
  message: string;
  subject: string | null;
  scopes: string[];
  audience: string | string[] | null;
  expiresAt: string | null;
  clientId: string | null;
  method: string;
  path: string;
  /** `dpop` when the token is DPoP-bound and the request's proof held (RFC 9449). */
  scheme: 'bearer' | 'dpop';
}

const REALM = 'demo-api';
// The algorithms real providers sign access tokens with; `none` and HS* never verify here.
const ALGORITHMS = ['RS256', 'PS256', 'ES256'];
const FETCH_TIMEOUT_MS = 5_000;

type KeySet = ReturnType<typeof createRemoteJWKSet>;

/** The key set is not reachable: the caller's token may be fine, so this is 503, not 401. */
class KeysUnavailable extends Error {}

export function createDemoApi(options: DemoApiOptions): DemoApi {
  const required = splitScopes(options.requiredScope);
  const otherAudiences = options.otherAudiences ?? {};
  const audiences = [options.audience, ...Object.keys(otherAudiences)];
  const dpop = createDpopChecker(options.dpop);
  const clockTolerance = options.clockToleranceSeconds ?? 5;
  let keySet: Promise<KeySet> | undefined;

  // Discovery is lazy: in the demo the provider may start after this API, and a provider that
  // was down must not stay "down" here once it is back, so a failed lookup is forgotten.
  function keys(): Promise<KeySet> {
    keySet ??= resolveJwksUri(options).then(
      (uri) => createRemoteJWKSet(new URL(uri), { timeoutDuration: FETCH_TIMEOUT_MS }),
      (err: unknown) => {
        keySet = undefined;
        throw err;
      },
    );
    return keySet;
  }

  async function verify(token: string): Promise<JWTPayload> {
    const jwks = await keys();
    try {
      const { payload } = await jwtVerify(token, jwks, {
        issuer: options.issuer,
        audience: audiences,
        algorithms: ALGORITHMS,
        clockTolerance,
        requiredClaims: ['exp'],
      });
      return payload;
    } catch (err) {
      if (isTokenError(err)) throw err;
      // Timeouts, network errors, non-200 and malformed key sets: the key source is at fault.
      throw new KeysUnavailable('The signing keys could not be fetched.', { cause: err });
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // The body is never needed; draining it keeps the connection reusable.
    req.resume();
    const path = requestPath(req.url);

    if (path === '/healthz') return send(res, 200, { status: 'ok' });
    if (path !== '/api' && !path.startsWith('/api/')) {
      return send(res, 404, { error: 'not_found', error_description: 'There is nothing at this path.' });
    }

    const credentials = bearerCredentials(req.headers.authorization);
    if (credentials.kind === 'none') {
      // RFC 6750 §3.1: a request without credentials gets the challenge but no error code.
      return send(res, 401, { error: 'invalid_token', error_description: 'The request carries no bearer access token.' }, {
        'WWW-Authenticate': `Bearer realm="${REALM}"`,
      });
    }
    const unauthorized = (description: string) =>
      send(res, 401, { error: 'invalid_token', error_description: description }, {
        'WWW-Authenticate': `Bearer realm="${REALM}", error="invalid_token", error_description=${quoted(description)}`,
      });
    if (credentials.kind === 'malformed') return unauthorized('The Authorization header is not a well-formed Bearer token.');
    const nonceHeader = (): Record<string, string> => {
      const nonce = dpop.currentNonce();
      return nonce ? { 'DPoP-Nonce': nonce } : {};
    };

    let claims: JWTPayload;
    try {
      claims = await verify(credentials.token);
    } catch (err) {
      if (!isTokenError(err)) {
        return send(res, 503, {
          error: 'temporarily_unavailable',
          error_description: 'The API cannot check access tokens right now: the signing keys are unreachable.',
        }, { 'Retry-After': '5' });
      }
      return unauthorized(describeTokenError(err));
    }

    const bound = typeof (claims.cnf as { jkt?: unknown } | undefined)?.jkt === 'string';
    if (credentials.kind === 'dpop') {
      const refusal = await dpop.check({
        method: req.method ?? 'GET',
        htu: `http://${req.headers.host ?? ''}${path}`,
        proof: req.headers.dpop,
        accessToken: credentials.token,
        claims,
      });
      if (refusal) {
        return send(res, 401, { error: refusal.error, error_description: refusal.description }, {
          'WWW-Authenticate': `DPoP realm="${REALM}", error="${refusal.error}", error_description=${quoted(refusal.description)}`,
          ...(refusal.error === 'use_dpop_nonce' ? { 'DPoP-Nonce': refusal.nonce } : nonceHeader()),
        });
      }
    } else if (bound) {
      // RFC 9449 §7.2: a DPoP-bound token presented as a bearer token proves nothing.
      return unauthorized('The access token is DPoP-bound and must be sent with a DPoP proof.');
    }

    const aud = claims.aud;
    const audience = (Array.isArray(aud) ? aud : [aud]).find((a): a is string => typeof a === 'string' && a in otherAudiences);
    const needed = audience !== undefined ? splitScopes(otherAudiences[audience] ?? '') : required;
    const scopes = tokenScopes(claims);
    const missing = needed.filter((s) => !scopes.includes(s));
    if (missing.length > 0) {
      const description = `The access token lacks the scope ${missing.join(' ')}.`;
      return send(res, 403, { error: 'insufficient_scope', error_description: description }, {
        'WWW-Authenticate': `${credentials.kind === 'dpop' ? 'DPoP' : 'Bearer'} realm="${REALM}", error="insufficient_scope", scope=${quoted(needed.join(' '))}, error_description=${quoted(description)}`,
      });
    }

    const answer: DemoApiAnswer = {
      message: 'Hello from the demo API',
      subject: typeof claims.sub === 'string' ? claims.sub : null,
      scopes,
      audience: claims.aud ?? null,
      expiresAt: typeof claims.exp === 'number' ? new Date(claims.exp * 1000).toISOString() : null,
      clientId: stringClaim(claims, 'client_id') ?? stringClaim(claims, 'azp') ?? null,
      method: req.method ?? 'GET',
      path,
      scheme: credentials.kind,
    };
    return send(res, 200, answer, credentials.kind === 'dpop' ? nonceHeader() : {});
  }

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res).catch(() => {
      // Never a stack trace (it could quote a header); the demo has no logger to send it to.
      if (!res.headersSent) send(res, 500, { error: 'server_error', error_description: 'The demo API failed unexpectedly.' });
      else res.destroy();
    });
  };

  return {
    handler,
    listen(port, host = '127.0.0.1') {
      const server = http.createServer(handler);
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve({
            port: (server.address() as AddressInfo).port,
            close: () =>
              new Promise<void>((done, fail) => {
                server.close((err) => (err ? fail(err) : done()));
                // The gateway keeps connections alive; without this, close waits for them.
                server.closeAllConnections();
              }),
          });
        });
      });
    },
  };
}

async function resolveJwksUri(options: DemoApiOptions): Promise<string> {
  if (options.jwksUri) return options.jwksUri;
  const url = `${options.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  let metadata: unknown;
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), headers: { accept: 'application/json' } });
    if (!response.ok) throw new Error(`discovery answered ${response.status}`);
    metadata = await response.json();
  } catch (err) {
    throw new KeysUnavailable('The provider metadata could not be fetched.', { cause: err });
  }
  const { issuer, jwks_uri: jwksUri } = (metadata ?? {}) as { issuer?: unknown; jwks_uri?: unknown };
  // A metadata document for another issuer could point us at keys we must not trust.
  if (issuer !== options.issuer || typeof jwksUri !== 'string' || !URL.canParse(jwksUri)) {
    throw new KeysUnavailable('The provider metadata is not usable for this issuer.');
  }
  return jwksUri;
}

/** RFC 6750 §3 attribute values: printable ASCII without `"` or `\`, so no escaping needed. */
function quoted(value: string): string {
  return `"${value.replace(/[^\x20-\x21\x23-\x5b\x5d-\x7e]/g, '')}"`;
}

function requestPath(url: string | undefined): string {
  try {
    return new URL(url ?? '/', 'http://demo-api.invalid').pathname;
  } catch {
    return '/';
  }
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const json = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(json),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    ...headers,
  });
  res.end(json);
}
