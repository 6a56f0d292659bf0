/**
 * Spans around the runtime's shared resources, put on by the runtime only when tracing is on
 * (so that, off, nothing here runs at all): the session read of every request, the refresh
 * coordinator and the client-credentials tokens. The domain modules stay unaware of tracing;
 * their children (the provider calls, oidc/traced-fetch.ts) find these spans as their parents.
 */
import type { ClientTokens } from '../proxy/client-token.js';
import type { RefreshCoordinator, RefreshOutcome } from '../session/refresh.js';
import type { SessionRecords } from '../session/records.js';
import { errorCodeOf, type Tracing } from './tracing.js';

/** load (Express endpoints) and view (proxied calls): the session read, one GETEX each. */
export function traceRecords<R extends SessionRecords>(records: R, tracing: Tracing): R {
  return {
    ...records,
    load: (digest) =>
      tracing.inSpan('session.read', {}, async (span) => {
        const session = await records.load(digest);
        span.setAttributes({ 'bff.session.found': session !== undefined });
        return session;
      }),
    view: (digest) =>
      tracing.inSpan('session.read', {}, async (span) => {
        const view = await records.view(digest);
        span.setAttributes({ 'bff.session.found': view !== undefined });
        return view;
      }),
  };
}

export type RefreshSpanOutcome = 'shared' | 'performed' | 'refused' | 'failed';

const REFRESH_OUTCOMES: Record<RefreshOutcome, RefreshSpanOutcome> = {
  success: 'performed',
  shared: 'shared',
  invalid_grant: 'refused',
  failure: 'failed',
};

/** Tells the active session.refresh span how the coordinated refresh went (from onRefresh). */
export function annotateRefresh(tracing: Tracing, outcome: RefreshOutcome): void {
  tracing.annotate({ 'bff.refresh.outcome': REFRESH_OUTCOMES[outcome] });
}

/**
 * session.refresh: `shared` unless this call's coordination reports otherwise (a caller that
 * joined another request's refresh in this process shares its result); a failure is `refused`
 * when the grant is gone (login_required), else `failed`.
 */
export function traceRefresher<R extends RefreshCoordinator>(refresher: R, tracing: Tracing): R {
  return {
    ...refresher,
    refresh: (digest, seen, refresh, context) =>
      tracing.inSpan('session.refresh', { attributes: { 'bff.refresh.outcome': 'shared' } }, async (span) => {
        try {
          return await refresher.refresh(digest, seen, refresh, context);
        } catch (err) {
          span.setAttributes({ 'bff.refresh.outcome': errorCodeOf(err) === 'login_required' ? 'refused' : 'failed' });
          throw err;
        }
      }),
  };
}

/** client_credentials.fetch: `cached` unless the provider was asked (the runtime's fetch says `fetched`). */
export function traceClientTokens(tokens: ClientTokens, tracing: Tracing): ClientTokens {
  const cached = { 'bff.client_credentials.outcome': 'cached' };
  return {
    get: (request) => tracing.inSpan('client_credentials.fetch', { attributes: cached }, () => tokens.get(request)),
    renew: (request, refused) =>
      tracing.inSpan('client_credentials.fetch', { attributes: { ...cached, 'bff.client_credentials.renewal': true } }, () =>
        tokens.renew(request, refused),
      ),
  };
}

/** Called by the runtime's fetch: this client-credentials span went to the provider. */
export function annotateClientFetch(tracing: Tracing): void {
  tracing.annotate({ 'bff.client_credentials.outcome': 'fetched' });
}
