/**
 * The state one provider instance shares between its configuration, middleware and pages.
 */
import type Provider from 'oidc-provider';
import type { JWK } from 'jose';
import type { JwtRecord } from './jwt-access-tokens.js';
import type { PendingSecondFactor } from './second-factor.js';
import type { DevStore } from './store.js';
import type { DevIdpCounters, DevIdpOptions, DevTtl, DevUser } from './types.js';

export interface AccountSession {
  accountId: string;
  expiresAt: number;
}

export interface Env {
  options: DevIdpOptions;
  ttl: Required<DevTtl>;
  users: Map<string, DevUser>;
  store: DevStore;
  provider: Provider;
  counters: DevIdpCounters;
  jwks: { keys: JWK[] };
  scopeWords: Record<string, string>;
  accountSessions: Map<string, AccountSession>;
  jwtRecords: Map<string, JwtRecord>;
  /** One-time codes by interaction uid (second-factor.ts). */
  secondFactors: Map<string, PendingSecondFactor>;
  log: (line: string) => void;
}
