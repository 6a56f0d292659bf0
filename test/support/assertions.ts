import { digest } from '../../src/redis/keys.js';
import type { TokenSet } from '../../src/session/tokens.js';
import type { SignInResult } from './drive-login.js';
import type { TestGateway } from './gateway.js';
import type { TestProvider } from './oidc-provider.js';
import { eventually } from './wait.js';
import { findSecret } from './secrets.js';

interface ResponseLike {
  status: number;
  headers: Headers;
  text: string;
}

/** The SPEC §6 error shape, status and no-store. */
export function expectErrorBody(res: ResponseLike, code: string, status?: number): void {
  if (status !== undefined) expect(res.status).toBe(status);
  expect(res.headers.get('cache-control')).toContain('no-store');
  const body = JSON.parse(res.text) as Record<string, unknown>;
  expect(body).toEqual({ error: code, error_description: expect.any(String) });
  expect(res.text).not.toMatch(/\bat .+\.(ts|js):\d+/); // no stack trace
}

/** Fails naming which secret appeared where (without printing the secret itself). */
export function expectNoSecretIn(haystack: string, secrets: Record<string, string | undefined>, where: string): void {
  const first = findSecret(haystack, secrets);
  if (first !== undefined) throw new Error(`${first} found in ${where}`);
}

/** The session ID inside a signed express-session cookie value (`s:<id>.<signature>`). */
export function sessionIdFromCookie(value: string): string {
  const decoded = decodeURIComponent(value);
  if (!decoded.startsWith('s:')) throw new Error('not a signed session cookie');
  return decoded.slice(2, decoded.lastIndexOf('.'));
}

/** Opens the sealed token set a session cookie points at, as only the gateway can. */
export async function tokensOfSession(gateway: TestGateway, cookieValue: string): Promise<TokenSet | undefined> {
  const d = digest(sessionIdFromCookie(cookieValue));
  const record = await gateway.runtime.records.peek(d);
  return record?.tokens.sealed ? gateway.runtime.vault.open(d, record.tokens.sealed) : undefined;
}

/** The secrets a pushed sign-in leaves behind: its code, its request_uri and the session's tokens. */
export function pushedSignInSecrets(result: Pick<SignInResult, 'authorizeUrl' | 'callbackUrl'>, tokens: TokenSet | undefined): Record<string, string | undefined> {
  return {
    code: new URL(result.callbackUrl).searchParams.get('code') ?? undefined,
    requestUri: result.authorizeUrl.searchParams.get('request_uri') ?? undefined,
    accessToken: tokens?.accessToken,
    refreshToken: tokens?.refreshToken,
    idToken: tokens?.idToken,
  };
}

/** Waits, bounded, until the provider no longer holds `token` active (a revocation the gateway sends in the background). */
export async function revokedAtProvider(provider: Pick<TestProvider, 'introspect'>, token: string | undefined, ms = 10_000): Promise<void> {
  if (token === undefined) throw new Error('no token to look up at the provider');
  await eventually('the token revoked at the provider', ms, async () => (await provider.introspect(token)).active === false || undefined, { intervalMs: 25 });
}
