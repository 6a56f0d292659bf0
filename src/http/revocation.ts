import type { Logger } from '../observability/logger.js';
import type { ProviderHandle } from '../oidc/client.js';
import { describeProviderError } from '../oidc/errors.js';
import { revokeTokens, type GrantedTokens } from '../oidc/flows.js';
import type { TokenSet } from '../session/tokens.js';

/** The session's further access tokens: per resource (RFC 8707) and per exchange (RFC 8693). */
function extraAccessTokens(tokens: Pick<TokenSet, 'resources' | 'exchanged'>): string[] {
  const extra: string[] = [];
  for (const byKey of [tokens.resources, tokens.exchanged]) {
    if (!byKey) continue;
    for (const key of Object.keys(byKey)) {
      const token = byKey[key]?.accessToken;
      if (typeof token === 'string' && token.length > 0) extra.push(token);
    }
  }
  return extra;
}

/**
 * Best-effort revocation (RFC 7009) of a session that has already ended locally: a slow or
 * failing provider is logged, never allowed to keep the session alive, and never retried (the
 * session is gone, so nothing would remember to; the tokens expire on their own).
 */
export function createRevoker(provider: ProviderHandle, logger: Logger) {
  return async function revoke(tokens: (GrantedTokens & Pick<TokenSet, 'resources' | 'exchanged'>) | undefined): Promise<void> {
    if (!tokens || !provider.isReady()) return;
    await revokeTokens(
      provider.get(),
      tokens,
      (err) => logger.warn({ event: 'revocation_failed', reason: describeProviderError(err) }, 'token revocation failed'),
      extraAccessTokens(tokens),
    );
  };
}
