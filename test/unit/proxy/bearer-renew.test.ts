/**
 * The credential resolver's renewal after an upstream refused a session's token: a token newer
 * than the refused one is used as it is; the refused one is refreshed only if the cooldown
 * allows it; otherwise PASS. The refresh coordinator is a stand-in with the real one's contract
 * (it refreshes only while the record is at the version the caller saw, and otherwise returns
 * the newer set), counting provider calls; the cooldown runs on the in-process Redis emulation.
 * Also: a due token is served while another process renews it only by the caller's own check.
 */
import { randomBytes } from 'node:crypto';
import { createSealer } from '../../../src/crypto/seal.js';
import { createRefusalCooldown } from '../../../src/proxy/refusal-cooldown.js';
import { createCredentialResolver, PASS, type LoadedSession } from '../../../src/proxy/bearer.js';
import type { ClientTokens } from '../../../src/proxy/client-token.js';
import { compileRoutes, type CompiledRoute } from '../../../src/proxy/routes.js';
import type { DpopProofs } from '../../../src/proxy/dpop-proofs.js';
import type { DpopNonces } from '../../../src/redis/dpop-nonces.js';
import type { ProviderHandle } from '../../../src/oidc/client.js';
import { createKeys } from '../../../src/redis/keys.js';
import { createMemoryRedis } from '../../../src/redis/memory.js';
import type { RedisClient } from '../../../src/redis/client.js';
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
const keys = createKeys('bearer-test:');
const digest = 'session-digest';
const route = compileRoutes(config.routes).routes[0] as CompiledRoute;

let redis: RedisClient;
/** The session record as the stand-in coordinator keeps it. */
let record: VersionedTokens;
let refreshes: number;

const tokenSet = (n: number): TokenSet => ({ accessToken: `access-${n}`, refreshToken: 'refresh', expiresAt: Math.floor(Date.now() / 1000) + 3600 });

const refresher: RefreshCoordinator = {
  refresh(_digest, seen) {
    if (record.version === seen.version) {
      refreshes++;
      record = { version: record.version + 1, tokens: tokenSet(record.version + 1) };
    }
    return Promise.resolve(record);
  },
};

const resolverWith = (coordinator: RefreshCoordinator) =>
  createCredentialResolver({
    config,
    vault,
    refresher: coordinator,
    provider: {} as ProviderHandle,
    clock: Date.now,
    clientTokens: {} as ClientTokens,
    refusals: createRefusalCooldown({ redis, keys }),
    // No route here uses DPoP: neither is reached.
    dpopNonces: {} as DpopNonces,
    dpopProofs: {} as DpopProofs,
  });
const resolver = () => resolverWith(refresher);

/** The session as a request that started now would have loaded it. */
const loaded = (): LoadedSession => ({
  digest,
  auth: { handle: 'h', sub: 'user-1', iss: 'https://idp.example', claims: {}, scopes: ['openid'], createdAt: Date.now() },
  tokens: { v: record.version, sealed: vault.seal(digest, record.tokens as TokenSet) },
});

const bearer = (n: number) => ({ header: 'authorization', value: `Bearer access-${n}` });

beforeEach(async () => {
  redis = createMemoryRedis();
  await redis.flushall();
  record = { version: 0, tokens: tokenSet(0) };
  refreshes = 0;
});

afterEach(() => {
  redis.disconnect();
});

describe('renewing a refused session token', () => {
  it('refreshes the current token once, then passes while the cooldown lasts', async () => {
    const { renew } = resolver();
    expect(await renew(route, loaded(), bearer(0))).toEqual(bearer(1));
    // The new token is refused too: the next request gets the upstream's 401.
    expect(await renew(route, loaded(), bearer(1))).toBe(PASS);
    expect(refreshes).toBe(1);
  });

  it('uses a token another request already got, without a refresh', async () => {
    const { renew } = resolver();
    const stale = loaded();
    record = { version: 1, tokens: tokenSet(1) };
    expect(await renew(route, stale, bearer(0))).toEqual(bearer(1));
    expect(refreshes).toBe(0);
  });

  it('catches up with the refresh that produced the refused token before renewing it', async () => {
    // The request loaded version 0, refreshed it on expiry to version 1, and that token was refused.
    const { renew } = resolver();
    record = { version: 0, tokens: { ...tokenSet(0), expiresAt: Math.floor(Date.now() / 1000) - 1 } };
    const stale = loaded();
    record = { version: 1, tokens: tokenSet(1) };
    expect(await renew(route, stale, bearer(1))).toEqual(bearer(2));
    expect(refreshes).toBe(1);
  });

  it('lets requests refused the same token share its refresh, on every instance', async () => {
    const session = loaded();
    const renewed = await Promise.all(Array.from({ length: 4 }, () => resolver().renew(route, session, bearer(0))));
    expect(renewed).toEqual(Array(4).fill(bearer(1)));
    expect(refreshes).toBe(1);
  });
});

/**
 * A due token served while another process renews it (session/refresh.ts `stillUsable`) is
 * served only by the caller's own check. In one process, a caller may join another's renewal of
 * the same set (same renewal key), whose check looked at another token (an exchange route's
 * exchanged token, while this route's sign-in token has expired): the coordinator hands it back
 * `seen`. The stand-in here answers `seen` once, as that join would, then renews.
 *
 * Fails if, in src/proxy/bearer.ts userAccessToken, the re-check goes
 * (`&& !hasExpired(usable, nowSeconds(deps.clock))` removed): the expired token was sent.
 */
describe('a due token while another process renews it', () => {
  it("is served only by its own check: an expired one is renewed, though the joined renewal answered `seen`", async () => {
    const now = Math.floor(Date.now() / 1000);
    record = { version: 1, tokens: { accessToken: 'expired', refreshToken: 'r', expiresAt: now - 5, lifetime: 60 } };
    const calls: Array<boolean | undefined> = [];
    const joined: RefreshCoordinator = {
      refresh(_digest, seen, _fn, context) {
        calls.push(context?.stillUsable?.());
        return Promise.resolve(calls.length === 1 ? seen : { version: seen.version + 1, tokens: tokenSet(2) });
      },
    };
    expect(await resolverWith(joined)(route, loaded())).toEqual(bearer(2));
    // Its own check said no each time: taking `seen` was never its own decision.
    expect(calls).toEqual([false, false]);
  });
});
