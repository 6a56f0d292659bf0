/**
 * Public types of the development OpenID provider (re-exported by ../idp.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { JWK } from 'jose';
import type Provider from 'oidc-provider';

export interface DevUser {
  id: string;
  password: string;
  claims: { name: string; email: string; [k: string]: unknown };
}

export interface DevClient {
  client_id: string;
  client_secret: string;
  client_name?: string;
  redirect_uris?: string[];
  post_logout_redirect_uris?: string[];
  backchannel_logout_uri?: string;
  /** Default true when `backchannel_logout_uri` is set: logout tokens and ID tokens carry `sid`. */
  backchannel_logout_session_required?: boolean;
  grant_types?: string[];
  response_types?: string[];
  token_endpoint_auth_method?: string;
  scope?: string;
}

export interface DevTtl {
  AccessToken?: number;
  RefreshToken?: number;
  IdToken?: number;
  Session?: number;
  ClientCredentials?: number;
  Grant?: number;
  Interaction?: number;
  AuthorizationCode?: number;
}

export interface DevResourceServer {
  scope: string;
  audience?: string;
  accessTokenTTL?: number;
}

export interface DevIdpOptions {
  /** e.g. http://127.0.0.1:4000; the server must listen on the matching port. */
  issuer: string;
  clients: DevClient[];
  /** Default: alice / alice-password and bob / bob-password. */
  users?: DevUser[];
  /** Extra scopes and the plain words the consent page shows for them. */
  scopes?: Record<string, string>;
  /** Seconds. */
  ttl?: DevTtl;
  /** RFC 8707 resources: access tokens for them are JWTs whose `aud` is the resource. */
  resourceServers?: Record<string, DevResourceServer>;
  /** Resource used when an authorization or token request names none. */
  defaultResource?: string;
  /** Private signing keys; default: one fresh RS256 key. */
  jwks?: { keys: object[] };
  /** Default true: a reused rotated refresh token revokes the whole grant. */
  rotateRefreshToken?: boolean;
  /** Where the provider reports what it does; default: nowhere. */
  logger?: (line: string) => void;
  /** Allowed clock skew in seconds for incoming JWTs (client assertions, DPoP); default 5. */
  clockTolerance?: number;
  /**
   * Scopes the user declines on the consent page (as if unticked): recorded as rejected on the
   * grant, so they are neither granted nor asked for again. Default: none.
   */
  declinedScopes?: string[];
  /**
   * RFC 9126 pushed authorization requests: off (not advertised, the default, so that tests
   * see the parameters in the browser's URL unless they ask), offered, or required.
   */
  pushedAuthorizationRequests?: 'off' | 'offered' | 'required';
  /**
   * `acr` and `auth_time` in every ID token, as many real providers do (Keycloak, Entra ID), not
   * only when the authorization request asks for them. Default false, so that tests see a
   * provider that does not say unless asked; the demo turns it on.
   */
  acrInEveryIdToken?: boolean;
  /**
   * RFC 9449 §8: the token endpoint demands a DPoP nonce in every proof (answering
   * `use_dpop_nonce` with a fresh one first). Default false: proofs without a nonce are fine.
   */
  dpopNonces?: boolean;
}

export interface DevIdpCounters {
  /** Token endpoint requests (successful or not) by grant_type. */
  grants: Record<string, number>;
  /** Token endpoint requests that ended in an error, by grant_type. */
  grantFailures: Record<string, number>;
  revocations: number;
  /**
   * The `jti` of each JWT access token presented at the revocation endpoint (oidc-provider
   * cannot revoke JWTs and answers unsupported_token_type, so this is where a test sees that the
   * gateway sent its resource and exchanged tokens). The latest 1000.
   */
  revokedJwtIds: string[];
  introspections: number;
  backchannelLogouts: number;
}

export interface ConnectedApplication {
  clientId: string;
  clientName: string;
  scopes: string[];
  resources: string[];
}

export interface DevIdpServer {
  port: number;
  close(): Promise<void>;
}

export interface DevIdp {
  issuer: string;
  provider: Provider;
  /** Node request listener serving the provider and the custom pages. */
  handler: (req: IncomingMessage, res: ServerResponse) => void;
  counters: DevIdpCounters;
  /** Public signing keys. */
  jwks: { keys: JWK[] };
  /** Private signing keys, for tests that sign tokens as the provider. */
  privateJwks: { keys: JWK[] };
  listen(port: number, host?: string): Promise<DevIdpServer>;
  /** What the account page's Revoke button does; resolves to the number of grants destroyed. */
  revokeGrantsFor(accountId: string, clientId: string): Promise<number>;
  connectedApplications(accountId: string): Promise<ConnectedApplication[]>;
  /**
   * JWT access tokens are self-contained, so oidc-provider refuses to introspect or revoke
   * them. This answers what introspection would: signature, issuer and expiry hold, and the
   * grant it was issued under still exists.
   */
  jwtAccessTokenActive(token: string): Promise<boolean>;
}
