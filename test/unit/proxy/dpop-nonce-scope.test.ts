/**
 * Upstream DPoP nonces and the provider's are kept apart (RFC 9449 §8, §9: each server has its
 * own): an upstream on the provider's origin, lying or not, neither sets nor reads the nonce the
 * token endpoint's proofs carry, on this instance or (through Redis) on another. The in-memory
 * Redis stands in for Redis.
 *
 * Mutation that fails it (checked by hand): in src/proxy/dpop-proofs.ts, make upstreamNonceKey
 * `(origin) => origin` (the upstream's nonce then lands on the provider's key).
 */
import { createDpopProofs, upstreamNonceKey } from '../../../src/proxy/dpop-proofs.js';
import { createDpopNonces } from '../../../src/redis/dpop-nonces.js';
import { createKeys } from '../../../src/redis/keys.js';
import { createMemoryRedis } from '../../../src/redis/memory.js';
import { generateDpopKey } from '../../../src/crypto/dpop.js';

const SHARED_ORIGIN = 'https://idp.example';
const keys = createKeys('nonce-scope:');
const claimsOf = (proof: string) => JSON.parse(Buffer.from(proof.split('.')[1] ?? '', 'base64url').toString()) as Record<string, unknown>;
const settle = () => new Promise((resolve) => setImmediate(resolve));

it("an upstream's nonce never becomes the provider's, here or on another instance", async () => {
  const redis = createMemoryRedis();
  const nonces = createDpopNonces({ redis, keys });
  const proofs = createDpopProofs({ nonces, clock: Date.now });
  const attachment = await proofs.attach(generateDpopKey(), 'token', SHARED_ORIGIN);
  attachment.nonce('upstream-says-this');
  await settle();
  // The provider's token endpoint handle reads the bare origin (oidc/dpop.ts).
  expect(await nonces.get(SHARED_ORIGIN)).toBeUndefined();
  expect(await createDpopNonces({ redis, keys }).get(SHARED_ORIGIN)).toBeUndefined();
  // The upstream's own nonce is shared as before.
  expect(await createDpopNonces({ redis, keys }).get(upstreamNonceKey(SHARED_ORIGIN))).toBe('upstream-says-this');
  expect(claimsOf(attachment.proof('GET', `${SHARED_ORIGIN}/api`)).nonce).toBe('upstream-says-this');
});

it("the provider's nonce never goes into an upstream's proof", async () => {
  const redis = createMemoryRedis();
  const nonces = createDpopNonces({ redis, keys: createKeys('nonce-scope-2:') });
  nonces.put(SHARED_ORIGIN, 'provider-nonce');
  const attachment = await createDpopProofs({ nonces, clock: Date.now }).attach(generateDpopKey(), 'token', SHARED_ORIGIN);
  const claims = claimsOf(attachment.proof('GET', `${SHARED_ORIGIN}/api`));
  expect(claims.htu).toBe(`${SHARED_ORIGIN}/api`);
  expect(claims.nonce).toBeUndefined();
});
