/**
 * The real provider (src/dev/idp.ts, oidc-provider v9) on a free loopback port, in a process of
 * its own, so sign-ins and refreshes cost the servers under test nothing but their own side.
 * `counters` answers the provider's token-endpoint counts (refresh_token grants).
 */
import { startTestProvider, type DevClient } from '../../test/support/oidc-provider.js';
import { childOptions, guardChild, serveChild } from '../lib/ipc.js';

export interface IdpOptions {
  clients: DevClient[];
  accessTokenTtl: number;
  /**
   * DPoP is on in the dev provider (`features.dPoP`, src/dev/idp/configuration.ts); this makes
   * its token endpoint demand a nonce in every proof as well. The bench runs without: a
   * provider nonce touches only sign-ins and refreshes, never a steady-state proxied call.
   */
  dpopNonces?: boolean;
}

guardChild(async () => {
  const opts = childOptions<IdpOptions>();
  const provider = await startTestProvider({
    clients: opts.clients,
    dpopNonces: opts.dpopNonces ?? false,
    ttl: {
      AccessToken: opts.accessTokenTtl,
      // The refresh storm moves the gateway's clock forward; nothing but the access token may
      // look expired because of that.
      IdToken: 86_400,
      RefreshToken: 86_400,
      Session: 86_400,
      Grant: 86_400,
    },
  });
  serveChild(
    { issuer: provider.issuer },
    { counters: () => JSON.parse(JSON.stringify(provider.counters)) as unknown },
    () => provider.close(),
  );
});
