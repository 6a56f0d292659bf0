/**
 * Login transactions (state, nonce, PKCE verifier, returnTo), kept in Redis by a digest of
 * `state`, sealed (the verifier and nonce are secrets), short-lived, and taken exactly once
 * (GETDEL), so a replayed callback finds nothing.
 */
import type { Sealer } from '../crypto/seal.js';
import type { RedisClient } from '../redis/client.js';
import { digest, type Keys } from '../redis/keys.js';

export interface LoginTransaction {
  state: string;
  nonce: string;
  codeVerifier: string;
  returnTo: string;
  /** Digest of the login cookie's value: binds the transaction to the browser that started it. */
  binding: string;
  createdAt: number;
}

export const TRANSACTION_TTL_SECONDS = 600;

export interface Transactions {
  save(tx: LoginTransaction): Promise<void>;
  take(state: string): Promise<LoginTransaction | undefined>;
}

const AAD = 'login-transaction';

export function createTransactions(redis: RedisClient, keys: Keys, sealer: Sealer): Transactions {
  return {
    async save(tx) {
      await redis.set(keys.transaction(digest(tx.state)), sealer.seal(JSON.stringify(tx), AAD), 'EX', TRANSACTION_TTL_SECONDS);
    },
    async take(state) {
      const sealed = await redis.getdel(keys.transaction(digest(state)));
      if (sealed === null) return undefined;
      const json = sealer.open(sealed, AAD);
      if (json === undefined) return undefined;
      const tx = JSON.parse(json) as LoginTransaction;
      // Defence in depth: the key is a digest, so check the full value too.
      return tx.state === state ? tx : undefined;
    },
  };
}
