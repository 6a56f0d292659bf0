import type { Logger } from '../observability/logger.js';
import type { ProviderHandle } from '../oidc/client.js';
import { describeProviderError } from '../oidc/errors.js';
import { revokeTokens, type GrantedTokens } from '../oidc/flows.js';

/**
 * Best-effort revocation (RFC 7009) of a session that has already ended locally: a slow or
 * failing provider is logged, never allowed to keep the session alive.
 */
export function createRevoker(provider: ProviderHandle, logger: Logger) {
  return async function revoke(tokens: GrantedTokens | undefined): Promise<void> {
    if (!tokens || !provider.isReady()) return;
    await revokeTokens(provider.get(), tokens, (err) =>
      logger.warn({ event: 'revocation_failed', reason: describeProviderError(err) }, 'token revocation failed'),
    );
  };
}
