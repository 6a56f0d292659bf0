import { randomBytes } from 'node:crypto';
import { ConfigError, parseConfig, type Config } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { redisUrlForTests } from './redis-server.js';

export const randomKey = () => randomBytes(32).toString('base64');
export const randomSecret = () => randomBytes(32).toString('base64url');

export interface TestConfigInput {
  issuer: string;
  publicUrl: string;
  clientId?: string;
  clientSecret?: string;
  redisUrl?: string;
  keyPrefix?: string;
  scopes?: string[];
  extraAuthParams?: Record<string, string>;
  /** More oidc keys (e.g. clientAuthMethod, privateKey). */
  oidc?: Partial<NonNullable<ConfigInput['oidc']>>;
  routes?: ConfigInput['routes'];
  session?: Partial<NonNullable<ConfigInput['session']>>;
  tokens?: ConfigInput['tokens'];
  rateLimit?: ConfigInput['rateLimit'];
  csrf?: ConfigInput['csrf'];
  server?: Partial<NonNullable<ConfigInput['server']>>;
  redis?: Partial<NonNullable<ConfigInput['redis']>>;
  logLevel?: 'debug' | 'info' | 'warn' | 'trace';
  observability?: ConfigInput['observability'];
}

/** A complete gateway config for tests, with fresh secrets and a unique Redis key prefix. */
export function buildTestConfig(input: TestConfigInput): Config {
  return parseConfig(
    {
      server: { port: 0, host: '127.0.0.1', publicUrl: input.publicUrl, ...input.server },
      oidc: {
        issuer: input.issuer,
        clientId: input.clientId ?? 'bff-test',
        clientSecret: input.clientSecret ?? 'bff-test-secret-0123456789abcdef',
        scopes: input.scopes ?? ['openid', 'profile', 'email', 'offline_access'],
        ...(input.extraAuthParams ? { extraAuthParams: input.extraAuthParams } : {}),
        ...input.oidc,
        clockToleranceSeconds: 5,
      },
      session: {
        secrets: [randomSecret()],
        encryptionKeys: [randomKey()],
        ...input.session,
      },
      redis: {
        url: input.redisUrl ?? redisUrlForTests(),
        keyPrefix: input.keyPrefix ?? `t${randomBytes(4).toString('hex')}:`,
        ...input.redis,
      },
      ...(input.tokens ? { tokens: input.tokens } : {}),
      ...(input.rateLimit ? { rateLimit: input.rateLimit } : {}),
      ...(input.csrf ? { csrf: input.csrf } : {}),
      ...(input.observability ? { observability: input.observability } : {}),
      routes: input.routes ?? [],
      log: { level: input.logLevel ?? 'debug' },
    },
    { env: {} },
  );
}

/** The problem lines parseConfig refuses `doc` with (ConfigError), or none. */
export function configProblems(doc: unknown, env: Record<string, string> = {}): string[] {
  try {
    parseConfig(doc, { env });
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}
