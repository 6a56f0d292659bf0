/**
 * Settings that are certainly wrong outside the demo (refused, one problem each) and settings
 * that may be deliberate but deserve a look (warned, one line each). Pure: the validated config
 * in, key paths and sentences out. No value is ever quoted, so no secret is ever printed.
 */
import { isLoopbackHost } from './hosts.js';
import { isTlsNode, nodeUrl } from './redis-node.js';
import type { ParsedConfig } from './schema.js';

export interface SafetyProblem {
  path: (string | number)[];
  message: string;
}

/**
 * The published secrets of config/default.yaml (the demo): anyone can read them, so a
 * deployment using one has no secret at all. Compared after decoding, so re-spelling the
 * base64 of the demo key does not pass.
 */
const DEMO_SECRETS = new Set(['demo-session-secret-not-for-production-use', 'demo-client-secret-not-for-production']);
const DEMO_KEYS = [Buffer.from('ZGVtby1vbmx5LWtleS1ub3QtZm9yLXByb2R1Y3Rpb24=', 'base64')];

/**
 * Fewer distinct values than this in a 32-byte key (or a secret) is a pattern, not randomness:
 * 32 random bytes have about 30 distinct values, and the chance of fewer than 8 is below 2^-100.
 */
const MIN_DISTINCT = 8;

const distinct = (values: Iterable<unknown>) => new Set(values).size;

/**
 * The process environment's settings that are certainly unsafe, as problem lines. With
 * NODE_TLS_REJECT_UNAUTHORIZED=0 Node accepts any certificate on every hop the gateway dials
 * through fetch or a default agent: an impostor provider was sent the client secret and the
 * code, an impostor WebSocket upstream a user's token, and the gateway said nothing (found by
 * the TLS red team). It is the kind of line left in a base image or a copied compose file.
 */
export function unsafeEnvironment(env: Readonly<Record<string, string | undefined>>): string[] {
  return env.NODE_TLS_REJECT_UNAUTHORIZED === '0'
    ? [
        'NODE_TLS_REJECT_UNAUTHORIZED: 0 makes Node accept any certificate on every hop it governs (the provider, https upstreams; Redis and wss are checked regardless), so the client secret and users\' tokens go to whoever answers; unset it (a private CA is trusted with NODE_EXTRA_CA_CERTS)',
      ]
    : [];
}

/** Refused whatever else the file says. */
export function unsafeSettings(cfg: ParsedConfig): SafetyProblem[] {
  const problems: SafetyProblem[] = [];
  const add = (path: (string | number)[], message: string) => problems.push({ path, message });
  const demo = cfg.dev !== undefined;

  // Not a URL: already reported by the schema.
  if (demo && URL.canParse(cfg.server.publicUrl) && new URL(cfg.server.publicUrl).protocol === 'https:') {
    add(['dev'], 'runs the demo provider and API with published secrets: it never belongs in an https deployment; remove it');
  }

  cfg.session.encryptionKeys.forEach((key, i) => {
    const bytes = Buffer.from(key, 'base64');
    if (distinct(bytes) < MIN_DISTINCT) add(['session', 'encryptionKeys', i], 'is not random (e.g. all zeros); generate one with `openssl rand -base64 32`');
    else if (!demo && DEMO_KEYS.some((k) => k.equals(bytes))) add(['session', 'encryptionKeys', i], 'is the demo key, which is published; generate one with `openssl rand -base64 32`');
  });
  cfg.session.secrets.forEach((secret, i) => {
    if (distinct(secret) < MIN_DISTINCT) add(['session', 'secrets', i], 'is not random (too few distinct characters); generate one with `openssl rand -base64 32`');
    else if (!demo && DEMO_SECRETS.has(secret)) add(['session', 'secrets', i], 'is the demo secret, which is published; generate one with `openssl rand -base64 32`');
  });
  if (!demo && cfg.oidc.clientSecret !== undefined && DEMO_SECRETS.has(cfg.oidc.clientSecret)) {
    add(['oidc', 'clientSecret'], "is the demo client's secret, which is published; use the one your provider issued");
  }
  return problems;
}

function cleartextHost(url: string, scheme: string): string | undefined {
  if (!URL.canParse(url)) return undefined;
  const parsed = new URL(url);
  return parsed.protocol === scheme && !isLoopbackHost(parsed.hostname) ? parsed.hostname : undefined;
}

/** Accepted, but printed at startup and by --check: may be deliberate on a private network. */
export function riskySettings(cfg: ParsedConfig): string[] {
  const warnings: string[] = [];
  if (cfg.redis.url !== undefined && cleartextHost(cfg.redis.url, 'redis:')) {
    warnings.push('redis.url: talks to a non-loopback Redis in cleartext (sealed tokens, session handles); use rediss:// unless the network is private');
  }
  const nodes = cfg.redis.cluster?.nodes ?? cfg.redis.sentinel?.nodes ?? [];
  // Each node is valid here (schema.ts): a bare `host:port` is cleartext, as is redis://.
  const plain = nodes.filter((n) => !isTlsNode(n) && !isLoopbackHost(nodeUrl(n).hostname));
  if (plain.length > 0) {
    const key = cfg.redis.cluster ? 'redis.cluster.nodes' : 'redis.sentinel.nodes';
    warnings.push(`${key}: ${plain.length} node(s) on non-loopback hosts without TLS; make sure the network is private`);
  }
  cfg.routes.forEach((route, i) => {
    if (cleartextHost(route.target, 'http:') && route.auth !== 'none') {
      warnings.push(`routes[${i}].target: sends ${route.auth === 'apiKey' ? 'an API key' : 'access tokens'} over cleartext http:// to a non-loopback host; use https:// unless the network is private`);
    }
  });
  return warnings;
}
