/**
 * One log line per token grant the gateway runs in the background (ASVS 16.3: auth events are
 * logged; SPEC §5: never a token): every session refresh with the session's public handle and
 * its outcome, and every failed client-credentials grant. The level says who must act: `info`
 * for the normal life of a session (refreshed, shared, ended by the provider), `warn` for a
 * transient provider failure, `error` when the gateway itself is refused (`invalid_client`,
 * or a route asking for a resource or scope the grant does not cover): every user is affected
 * until an operator fixes the registration or the configuration.
 */
import type { Logger } from '../observability/logger.js';
import type { RefreshOutcome, RefreshReport } from '../session/refresh.js';
import { classifyGrantFailure, describeProviderError, type GrantFailure } from './errors.js';

type Level = 'info' | 'warn' | 'error';

function failureLevel(failure: GrantFailure): Level {
  if (failure === 'client_rejected' || failure === 'request_refused') return 'error';
  return failure === 'transient' ? 'warn' : 'info';
}

const MESSAGES: Record<RefreshOutcome, string> = {
  success: 'session tokens refreshed',
  shared: 'session tokens refreshed by another request',
  invalid_grant: 'the provider refused the refresh for good; session ended',
  failure: 'session token refresh failed; session kept',
};

const EXCHANGE_MESSAGES: Record<RefreshOutcome, string> = {
  success: 'token exchanged for a route',
  shared: 'token exchanged for a route by another request',
  invalid_grant: 'the provider refused the token exchange; session kept',
  failure: 'token exchange failed; session kept',
};

export function logRefresh(logger: Logger, outcome: RefreshOutcome, report: RefreshReport): void {
  const failure = report.error !== undefined ? classifyGrantFailure(report.error) : undefined;
  const level: Level = failure ? failureLevel(failure) : 'info';
  // A renewal without the refresh token is a token exchange (RFC 8693, proxy/token-exchange.ts).
  const exchange = report.needsRefreshToken === false;
  logger[level](
    {
      event: exchange ? 'token_exchange' : 'token_refresh',
      outcome,
      ...(report.handle ? { session: report.handle } : {}),
      ...(failure ? { failure, reason: describeProviderError(report.error) } : {}),
    },
    failure === 'client_rejected'
      ? `the provider refused the gateway's client credentials during a ${exchange ? 'token exchange' : 'refresh'}`
      : (exchange ? EXCHANGE_MESSAGES : MESSAGES)[outcome],
  );
}

export function logClientCredentialsFailure(logger: Logger, err: unknown): void {
  const failure = classifyGrantFailure(err);
  logger[failure === 'transient' ? 'warn' : 'error'](
    { event: 'client_credentials_failed', failure, reason: describeProviderError(err) },
    failure === 'client_rejected' ? "the provider refused the gateway's client credentials" : 'client-credentials grant failed',
  );
}
