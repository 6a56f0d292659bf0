/**
 * The configuration contract (SPEC §2), key for key (consistency.ts checks the keys together).
 * Objects are strict so that a misspelt key is an error rather than a silently ignored setting.
 * Secrets have no defaults: the demo's values live only in config/default.yaml.
 */
import { MAX_TIMER_MS } from '../clock.js';
import { z } from 'zod';
import { isAcrValue, MAX_ACR_VALUES, MAX_AGE_LIMIT_SECONDS } from './auth-params.js';
import { canonicalPath } from './canonical-path.js';
import { configProblems } from './consistency.js';
import { parseCidr, trustedRangeProblem } from './cidr.js';
import { privateKeyProblem } from './private-key.js';
import { isLoopbackHost } from './hosts.js';
import { isTlsNode, redisNodeProblem } from './redis-node.js';
import { csrfHeaderName, headerName } from './header-names.js';

export { isLoopbackHost } from './hosts.js';

/** The longest wait Node's timers take (2^31 - 1 ms): a longer one fires after 1 ms. */
export const MAX_TIMER_SECONDS = Math.floor(MAX_TIMER_MS / 1000);
/** A wait the gateway times in-process: past MAX_TIMER_SECONDS, Node would end it at once. */
const seconds = (def: number) =>
  z.number().int().positive().max(MAX_TIMER_SECONDS, `must be at most ${MAX_TIMER_SECONDS} (24.8 days: Node's timers take no longer)`).default(def);
/** A lifetime Redis keeps (a key's TTL); in-process deadlines derived from it are re-armed. */
const lifetimeSeconds = (def: number) => z.number().int().positive().default(def);

const httpUrl = z
  .string()
  .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), {
    message: 'must be an absolute http(s) URL',
  });

/**
 * Parts of a URL setting the gateway would drop without a word, refused instead; `parts` names
 * the ones this setting has no use for. Never quotes them: credentials are secrets.
 */
const withoutParts = (parts: { userinfo?: string; query?: string; fragment?: string }) =>
  httpUrl.superRefine((value, ctx) => {
    if (!URL.canParse(value)) return;
    const url = new URL(value);
    const add = (message: string) => ctx.addIssue({ code: 'custom', message });
    if (parts.userinfo && (url.username !== '' || url.password !== '')) add(parts.userinfo);
    if (parts.query && url.search !== '') add(parts.query);
    if (parts.fragment && url.hash !== '') add(parts.fragment);
  });

/**
 * http:// only to this machine (the demo, tests); anywhere else, https://. A value that is not a
 * URL has been reported already (httpUrl) and is passed over.
 */
const httpsUnlessLoopback = (value: string, ctx: z.RefinementCtx) => {
  if (URL.canParse(value) && new URL(value).protocol === 'http:' && !isLoopbackHost(new URL(value).hostname)) {
    ctx.addIssue({ code: 'custom', message: 'http:// is allowed only for loopback hosts; use https://' });
  }
};

const routePath = z
  .string()
  .regex(/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/, { message: 'must be a path starting with "/"' })
  .refine((p) => p === '/' || !p.endsWith('/'), { message: 'must not end with "/"' })
  // The form requests are matched in (canonical-path.ts): a route written otherwise could
  // never match, or would match something else than it says.
  .refine((p) => canonicalPath(p) === p, {
    message:
      'must be canonical: no segment of dots and spaces only (".", "..", "..."), no "//" or ";", no %2F, %5C, %3F, %23, %25 or control-character escapes; letters, digits and "-._~" not %-encoded, other escapes in uppercase hex',
  });

const trustedRange = z.string().superRefine((value, ctx) => {
  const cidr = parseCidr(value);
  const message = cidr === undefined ? 'must be an IP address or CIDR range' : trustedRangeProblem(cidr);
  if (message !== undefined) ctx.addIssue({ code: 'custom', message });
});

// Strict base64 (or base64url) of 32 bytes: Node's decoder skips what it cannot read, so a
// passphrase or a mistyped placeholder of the right length decoded to 32 bytes of readable text.
const BASE64_32 = /^(?:[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=?|[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048])$/;
const base64Key32 = z.string().refine((v) => BASE64_32.test(v), {
  message: 'must be 32 bytes, base64-encoded (e.g. `openssl rand -base64 32`)',
});

const redisNode = z.string().superRefine((node, ctx) => {
  const message = redisNodeProblem(node);
  if (message !== undefined) ctx.addIssue({ code: 'custom', message });
});
/**
 * A cluster's or Sentinel set's nodes: `host:port`, `redis://` or `rediss://`. One TLS setting
 * covers every connection of the client (the nodes a cluster reports, a Sentinel's master), so
 * TLS is for all the nodes or none (redis/client.ts).
 */
const redisNodes = z
  .array(redisNode)
  .min(1)
  .refine((nodes) => nodes.every(isTlsNode) || !nodes.some(isTlsNode), {
    message: 'mix rediss:// and plaintext nodes; use rediss:// for all of them (TLS everywhere) or for none',
  });

export const routeSchema = z.strictObject({
  path: routePath,
  target: withoutParts({
    userinfo: 'must not carry credentials: they are not sent to the upstream (use auth: apiKey for a key)',
    fragment: 'must not have a fragment: it is never sent',
  }),
  auth: z.enum(['user', 'user-optional', 'client', 'apiKey', 'none']).default('user'),
  scopes: z.array(z.string().min(1)).default([]),
  resource: httpUrl.optional(),
  stripPrefix: z.boolean().default(false),
  timeoutSeconds: seconds(30),
  /** Connections open to this upstream at most; calls past it wait (within timeoutSeconds). */
  maxConnections: z.number().int().min(1).max(65536).default(512),
  websocket: z.boolean().default(false),
  requireSession: z.boolean().default(false),
  apiKey: z.strictObject({ header: headerName, value: z.string().min(1) }).optional(),
  /**
   * RFC 9470: the session must have signed in with one of `acr` and/or within `maxAgeSeconds`,
   * else 401 step_up_required before the upstream is called.
   */
  stepUp: z
    .strictObject({
      acr: z
        .array(z.string().refine(isAcrValue, { message: 'must be an acr value of URI characters (no spaces or quotes), at most 200 long' }))
        .min(1)
        .max(MAX_ACR_VALUES)
        .optional(),
      maxAgeSeconds: z.number().int().min(0).max(MAX_AGE_LIMIT_SECONDS).optional(),
    })
    .optional(),
  /** RFC 9449: `Authorization: DPoP` and a fresh proof on every call to this upstream. */
  dpop: z.boolean().default(false),
  /** RFC 8693: the session's access token is exchanged for one meant for this API. */
  tokenExchange: z
    .strictObject({
      audience: z.string().min(1),
      scope: z.string().min(1).optional(),
      resource: httpUrl.optional(),
    })
    .optional(),
});

export const configSchema = z
  .strictObject({
    server: z.strictObject({
      port: z.number().int().min(0).max(65535).default(3000),
      host: z.string().min(1).default('0.0.0.0'),
      publicUrl: withoutParts({
        userinfo: 'must not carry credentials (user:password@)',
        query: 'must be an origin without a query',
        fragment: 'must be an origin without a fragment',
      })
        .superRefine(httpsUnlessLoopback)
        .refine((v) => !URL.canParse(v) || new URL(v).pathname === '/', {
          message: 'must be an origin without a path (e.g. https://app.example.com)',
        }),
      authPath: routePath.default('/auth'),
      /**
       * false: no proxy in front; true: exactly one trusted hop; N: that many hops; [CIDR, ...]:
       * hops whose address is in these ranges. Never "every hop".
       */
      trustProxy: z
        .union([
          z.boolean(),
          z.number().int().min(1).max(10),
          z.array(trustedRange).min(1),
        ])
        .default(false),
      metricsPort: z.number().int().min(0).max(65535).optional(),
      /** Worker processes on this port (node:cluster), supervised; `auto`: one per available core. */
      workers: z.union([z.number().int().min(1).max(64), z.literal('auto')]).default(1),
      shutdownTimeoutSeconds: seconds(10),
      /** With workers: a worker that answers no heartbeat for this long is killed and replaced. */
      workerUnresponsiveSeconds: seconds(30),
      /** How long a gateway endpoint waits for a request body to finish arriving. */
      requestBodyTimeoutSeconds: seconds(10),
      /** Request headers never forwarded upstream, in addition to the built-in list. */
      stripRequestHeaders: z.array(headerName).default([]),
    }),
    oidc: z.strictObject({
      issuer: httpUrl.superRefine(httpsUnlessLoopback),
      clientId: z.string().min(1),
      clientSecret: z.string().min(1).optional(),
      clientAuthMethod: z
        .enum(['client_secret_basic', 'client_secret_post', 'private_key_jwt'])
        .default('client_secret_basic'),
      /** PEM private key, RSA (2048 bits or more) or EC P-256, for clientAuthMethod private_key_jwt. */
      privateKey: z
        .string()
        .min(1)
        .superRefine((pem, ctx) => {
          const message = pem === '' ? undefined : privateKeyProblem(pem);
          if (message !== undefined) ctx.addIssue({ code: 'custom', message });
        })
        .optional(),
      clockToleranceSeconds: z.number().int().min(0).max(300).default(30),
      scopes: z.array(z.string().min(1)).min(1).default(['openid']),
      extraAuthParams: z.record(z.string(), z.string()).default({}),
      postLogoutRedirectPath: routePath.default('/'),
      /**
       * RFC 9126. auto: when the provider advertises a PAR endpoint (and always when it says
       * require_pushed_authorization_requests); always: every login (a provider without the
       * endpoint fails the login with 503); never: not even when the provider requires it (then
       * the login fails with 503 rather than at the provider's page).
       */
      pushedAuthorizationRequests: z.enum(['auto', 'always', 'never']).default('auto'),
      idTokenSigningAlgs: z
        .array(z.enum(['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']))
        .min(1)
        .default(['RS256', 'PS256', 'ES256', 'EdDSA']),
      /** RFC 9449: sender-constrained tokens for every user route (or per route: routes[].dpop). */
      dpop: z.boolean().default(false),
    }),
    session: z.strictObject({
      cookieName: z
        .string()
        .regex(/^[A-Za-z0-9_-]+$/, { message: 'must be letters, digits, "_" or "-"' })
        .default('bff'),
      sameSite: z.enum(['strict', 'lax']).default('strict'),
      secrets: z.array(z.string().min(32, { message: 'must be at least 32 characters' })).min(1),
      encryptionKeys: z.array(base64Key32).min(1),
      idleTimeoutSeconds: lifetimeSeconds(1800),
      absoluteTimeoutSeconds: lifetimeSeconds(43200),
      maxPerUser: z.number().int().min(1).max(10_000).default(50),
      /**
       * How long an ended session's revocation is its own process's before any instance takes it
       * up (its process died, or the provider failed it), and how often it is tried again until
       * the kept record expires (10 minutes): session/revocation-outbox.ts.
       */
      revocationRetrySeconds: z.number().int().min(1).max(300).default(60),
    }),
    redis: z
      .strictObject({
        url: z
          .string()
          .refine((v) => URL.canParse(v) && /^rediss?:$/.test(new URL(v).protocol), {
            message: 'must be a redis:// or rediss:// URL',
          })
          .optional(),
        cluster: z.strictObject({ nodes: redisNodes }).optional(),
        sentinel: z
          .strictObject({
            name: z.string().min(1),
            nodes: redisNodes,
            password: z.string().optional(),
          })
          .optional(),
        password: z.string().optional(),
        keyPrefix: z.string().default('bff:'),
        commandTimeoutMs: z.number().int().min(50).max(60000).default(1000),
      })
      .default({ url: 'redis://127.0.0.1:6379', keyPrefix: 'bff:', commandTimeoutMs: 1000 }),
    tokens: z
      .strictObject({ refreshSkewSeconds: z.number().int().min(0).max(3600).default(30) })
      .default({ refreshSkewSeconds: 30 }),
    csrf: z.strictObject({ headerName: csrfHeaderName.default('x-csrf') }).default({ headerName: 'x-csrf' }),
    rateLimit: z
      .strictObject({
        loginPerMinute: z.number().int().min(1).default(60),
        /** Sign-ins in progress across all instances; past it, /auth/login answers 429. */
        maxActiveLogins: z.number().int().min(1).default(10_000),
      })
      .default({ loginPerMinute: 60, maxActiveLogins: 10_000 }),
    log: z
      .strictObject({
        level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
      })
      .default({ level: 'info' }),
    observability: z
      .strictObject({
        /** OpenTelemetry traces: off unless an endpoint is set (or OTEL_EXPORTER_OTLP_ENDPOINT, load.ts). */
        tracing: z
          .strictObject({
            /** OTLP/HTTP traces URL, as is (e.g. http://otel-collector:4318/v1/traces); a bare origin in the file gets /v1/traces (load.ts). */
            endpoint: withoutParts({ userinfo: 'must not carry credentials' }).optional(),
            /** Make the gateway's spans children of the browser's traceparent (else it is ignored). */
            trustIncoming: z.boolean().default(false),
            serviceName: z.string().min(1).max(100).default('bff-gateway'),
            /** Share of new traces recorded (a trusted parent's decision is followed). */
            sampleRatio: z.number().min(0).max(1).default(1),
          })
          .default({ trustIncoming: false, serviceName: 'bff-gateway', sampleRatio: 1 }),
      })
      .default({ tracing: { trustIncoming: false, serviceName: 'bff-gateway', sampleRatio: 1 } }),
    routes: z.array(routeSchema).default([]),
    static: z
      .strictObject({ root: z.string().min(1), spaFallback: z.boolean().default(true) })
      .optional(),
    dev: z
      .strictObject({
        idp: z.strictObject({ port: z.number().int().min(0).max(65535).default(4000) }).default({ port: 4000 }),
        api: z.strictObject({ port: z.number().int().min(0).max(65535).default(4001) }).default({ port: 4001 }),
        /** Fall back to an in-memory session store when Redis does not answer (demo only). */
        memoryStoreFallback: z.boolean().default(true),
      })
      .optional(),
  })
  .superRefine((cfg, ctx) => {
    for (const problem of configProblems(cfg)) ctx.addIssue({ code: 'custom', path: problem.path, message: problem.message });
  });

export type ConfigInput = z.input<typeof configSchema>;
export type ParsedConfig = z.output<typeof configSchema>;
export type RouteConfig = z.output<typeof routeSchema>;
export type RedisConfig = ParsedConfig['redis'];
export type SessionConfig = ParsedConfig['session'];
export type OidcConfig = ParsedConfig['oidc'];
