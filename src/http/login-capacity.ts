/**
 * Sign-ins in progress, against `rateLimit.maxActiveLogins` (every instance shares the count in
 * Redis): past it `/auth/login` answers 429 with `Retry-After`, never a full Redis. Past half of
 * it, a network (redis/rate-limit.ts networkBucket) that started more than its share within a
 * transaction's life is refused too: a few networks within their per-minute budgets (17
 * addresses, or 17 /64s of one home's /56, with the defaults) held the whole cap for as long as
 * they kept sending, and no one else could sign in.
 */
import type { Config } from '../config/load.js';
import { GatewayError } from '../errors.js';
import { atMostEvery } from '../clock.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { withStore } from '../redis/errors.js';
import type { Transactions } from '../session/transactions.js';

/** One warning per minute at most when the global cap refuses logins (a flood must not flood the log too). */
const CAP_LOG_INTERVAL_MS = 60_000;
/**
 * Under pressure, one network may start at most this share of the cap within a transaction's
 * life (at least MIN_NETWORK_SHARE): 50 of 10,000, so that it takes a hundred networks, not a
 * handful, to hold the rest.
 */
const NETWORK_SHARES = 200;
const MIN_NETWORK_SHARE = 10;

export interface LoginCapacityDeps {
  config: Config;
  transactions: Pick<Transactions, 'load'>;
  metrics: Metrics;
  logger: Logger;
  clock: () => number;
}

/** `admit(held)`: resolves when a sign-in may start; `held` is what its network started (LoginLimiter.hit). */
export function createLoginCapacity(deps: LoginCapacityDeps): (held: number) => Promise<void> {
  const { transactions, metrics, logger, clock } = deps;
  const cap = deps.config.rateLimit.maxActiveLogins;
  const share = Math.max(MIN_NETWORK_SHARE, Math.ceil(cap / NETWORK_SHARES));
  const mayLog = atMostEvery(CAP_LOG_INTERVAL_MS, clock);
  const refuse = (description: string, retryAfterSeconds: number) => {
    metrics.loginTransactions.inc({ outcome: 'over_capacity' });
    return new GatewayError('rate_limited', { description, headers: { 'Retry-After': String(retryAfterSeconds) } });
  };
  return async (held) => {
    const load = await withStore(() => transactions.load());
    if (load.active * 2 >= cap && held > share) {
      throw refuse('Too many sign-ins from your network are in progress; try again later.', load.retryAfterSeconds);
    }
    if (load.active < cap) return;
    if (mayLog()) logger.warn({ event: 'login_capacity', active: load.active, max: cap }, 'too many logins in progress; refusing new ones');
    throw refuse('Too many sign-ins are in progress; try again later.', load.retryAfterSeconds);
  };
}
