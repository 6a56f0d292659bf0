/**
 * Token, session and interaction lifetimes: the defaults and the demo's environment knob.
 */
import type { DevTtl } from './types.js';

export const DEFAULT_TTL: Required<DevTtl> = {
  AccessToken: 600,
  RefreshToken: 24 * 60 * 60,
  IdToken: 60 * 60,
  Session: 24 * 60 * 60,
  ClientCredentials: 600,
  Grant: 14 * 24 * 60 * 60,
  Interaction: 10 * 60,
  AuthorizationCode: 60,
};

/**
 * The demo's one lifetime knob: DEV_IDP_ACCESS_TOKEN_TTL (seconds) shortens the dev provider's
 * access tokens (600 s by default), so a silent refresh can be watched (or tested against the
 * real `npm start`) without waiting ten minutes. Read here because dev/ may touch process.env.
 */
export function devTtlFromEnv(env: NodeJS.ProcessEnv = process.env): DevTtl {
  const raw = env.DEV_IDP_ACCESS_TOKEN_TTL;
  if (raw === undefined || raw === '') return {};
  const seconds = Number(raw);
  if (!Number.isSafeInteger(seconds) || seconds < 1) {
    throw new Error(`DEV_IDP_ACCESS_TOKEN_TTL must be a whole number of seconds (at least 1), not ${JSON.stringify(raw)}`);
  }
  return { AccessToken: seconds };
}
