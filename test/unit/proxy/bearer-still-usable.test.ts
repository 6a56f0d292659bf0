/**
 * A due token served while another process renews it (session/refresh.ts `stillUsable`) is
 * served only by the caller's own check. In one process, a caller may join another's renewal of
 * the same set (same renewal key), whose check looked at another token (an exchange route's
 * exchanged token, while this route's sign-in token has expired): the coordinator hands it back
 * `seen`. The stand-in coordinator here answers `seen` once, as that join would, then renews.
 *
 * Fails if, in src/proxy/bearer.ts userAccessToken, the re-check goes
 * (`&& !expiresWithin(usable, 0, nowSeconds(deps.clock))` removed): the expired token was sent.
 */
import { randomBytes } from 'node:crypto';
import { createSealer } from '../../../src/crypto/seal.js';
import { createRefusalCooldown } from '../../../src/proxy/refusal-cooldown.js';
import { createCredentialResolver, type LoadedSession } from '../../../src/proxy/bearer.js';
import type { ClientTokens } from '../../../src/proxy/client-token.js';
import { compileRoutes, type CompiledRoute } from '../../../src/proxy/routes.js';
import type { DpopProofs } from '../../../src/proxy/dpop-proofs.js';
import type { DpopNonces } from '../../../src/redis/dpop-nonces.js';
import type { ProviderHandle } from '../../../src/oidc/client.js';
import { createKeys } from '../../../src/redis/keys.js';
import { createMemoryRedis } from '../../../src/redis/memory.js';
import type { RefreshCoordinator } from '../../../src/session/refresh.js';
import type { TokenSet, VersionedTokens } from '../../../src/session/tokens.js';
import { createTokenVault } from '../../../src/session/vault.js';
import { buildTestConfig } from '../../support/config.js';

const config = buildTestConfig({
  issuer: 'https://idp.example',
  publicUrl: 'http://127.0.0.1:3000',
  redisUrl: 'redis://127.0.0.1:1',
  routes: [{ path: '/api', target: 'http://127.0.0.1:1', auth: 'user' }],
});
const vault = createTokenVault(createSealer([randomBytes(32).toString('base64')]));
const route = compileRoutes(config.routes).routes[0] as CompiledRoute;
const digest = 'session-digest';
const now = () => Math.floor(Date.now() / 1000);

it("serves a due token only by its own check: an expired one is renewed, though the joined renewal answered `seen`", async () => {
  const expired: TokenSet = { accessToken: 'expired', refreshToken: 'r', expiresAt: now() - 5, lifetime: 60 };
  const fresh: TokenSet = { accessToken: 'fresh', refreshToken: 'r', expiresAt: now() + 3600, lifetime: 3600 };
  const calls: Array<boolean | undefined> = [];
  const refresher: RefreshCoordinator = {
    refresh(_digest, seen, _fn, context) {
      calls.push(context?.stillUsable?.());
      // First: the answer of another caller's renewal this one joined (its check said usable).
      return Promise.resolve(calls.length === 1 ? seen : ({ version: seen.version + 1, tokens: fresh } satisfies VersionedTokens));
    },
  };
  const redis = createMemoryRedis();
  try {
    const resolve = createCredentialResolver({
      config,
      vault,
      refresher,
      provider: {} as ProviderHandle,
      clock: Date.now,
      clientTokens: {} as ClientTokens,
      refusals: createRefusalCooldown({ redis, keys: createKeys('still-usable:') }),
      dpopNonces: {} as DpopNonces,
      dpopProofs: {} as DpopProofs,
    });
    const session: LoadedSession = {
      digest,
      auth: { handle: 'h', sub: 'user-1', iss: 'https://idp.example', claims: {}, scopes: ['openid'], createdAt: Date.now() },
      tokens: { v: 1, sealed: vault.seal(digest, expired) },
    };
    expect(await resolve(route, session)).toEqual({ header: 'authorization', value: 'Bearer fresh' });
    // Its own check said no each time: it was never its own decision to take `seen`.
    expect(calls).toEqual([false, false]);
  } finally {
    redis.disconnect();
  }
});
