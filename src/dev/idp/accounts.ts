/**
 * Accounts: the default demo users, password checks and the claims oidc-provider reads.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Account } from 'oidc-provider';
import type { DevUser } from './types.js';

export function defaultUsers(): DevUser[] {
  return [
    {
      id: 'alice',
      password: 'alice-password',
      claims: { name: 'Alice Liddell', given_name: 'Alice', family_name: 'Liddell', email: 'alice@example.com' },
    },
    {
      id: 'bob',
      password: 'bob-password',
      claims: { name: 'Bob Builder', given_name: 'Bob', family_name: 'Builder', email: 'bob@example.com' },
    },
  ];
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

export function constantTimeEquals(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

export function authenticate(users: Map<string, DevUser>, login: string, password: string): DevUser | undefined {
  const user = users.get(login) ?? [...users.values()].find((u) => u.claims.email === login);
  // Compare even for unknown users so timing does not reveal which logins exist.
  const ok = constantTimeEquals(user?.password ?? randomBytes(16).toString('hex'), password);
  return ok ? user : undefined;
}

export function toAccount(user: DevUser): Account {
  return {
    accountId: user.id,
    claims: () => ({ email_verified: true, ...user.claims, sub: user.id }),
  };
}
