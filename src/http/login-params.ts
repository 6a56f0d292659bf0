/**
 * The query of GET /auth/login, parsed once into canonical values (SPEC §3): `returnTo` and the
 * allow-listed login parameters the SPA may pass to the provider. Anything else (an unknown
 * name, a repeated one, a value out of its syntax) is 400 invalid_request: nothing the browser
 * writes reaches the provider unless it is named and checked here. Pure: no Express.
 */
import { acrList, MAX_ACR_VALUES, MAX_AGE_LIMIT_SECONDS, parseMaxAge } from '../config/auth-params.js';
import { GatewayError } from '../errors.js';
import { PROMPT_VALUES, type LoginParams, type PromptValue } from '../oidc/authorization-request.js';

export interface LoginQuery {
  /** Not yet judged: return-to.ts does that. */
  returnTo: string | undefined;
  params: LoginParams;
  /** The gateway's own: which cross-site bounce this arrival answers (login-bounce.ts). Never sent to the provider. */
  bounce?: string;
}

const KNOWN = new Set(['returnTo', 'prompt', 'login_hint', 'ui_locales', 'acr_values', 'max_age', 'bounce']);
const BOUNCE = /^[A-Za-z0-9_-]{22}$/;

/** No control characters, whitespace, quotes, angle brackets or backslashes; an email or an opaque id fits. */
const LOGIN_HINT = /^[^\u0000-\u0020\u007f-\u009f"'<>\\]{1,256}$/u;
/** BCP 47 tag shape (RFC 5646 §2.1, loosely): letters, then `-`-separated alphanumeric subtags. */
const LOCALE = /^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8}){0,7}$/;
const MAX_LOCALES = 10;

const bad = (name: string, expected: string) =>
  new GatewayError('invalid_request', { description: `The ${name} parameter is malformed: ${expected}.` });

/** Space-separated tokens, single spaces, each passing `ok`; duplicates dropped. */
function tokens(value: string, name: string, max: number, ok: (t: string) => boolean, expected: string): string[] {
  const list = value.split(' ');
  if (list.length > max || !list.every((t) => t.length > 0 && ok(t))) throw bad(name, expected);
  return [...new Set(list)];
}

function parsePrompt(value: string): PromptValue[] {
  const list = tokens(value, 'prompt', PROMPT_VALUES.length, (t) => (PROMPT_VALUES as readonly string[]).includes(t), 'none, login, consent, select_account or create');
  // OIDC Core §3.1.2.1: none with any other value is an error.
  if (list.includes('none') && list.length > 1) throw bad('prompt', 'none stands alone');
  return list as PromptValue[];
}

export function parseLoginQuery(query: URLSearchParams): LoginQuery {
  const strings: Partial<Record<string, string>> = {};
  for (const [name, value] of query) {
    if (!KNOWN.has(name)) {
      throw new GatewayError('invalid_request', { description: 'Only returnTo, prompt, login_hint, ui_locales, acr_values and max_age are accepted.' });
    }
    if (Object.hasOwn(strings, name)) throw bad(name, 'given once');
    strings[name] = value;
  }
  const params: LoginParams = {};
  if (strings.prompt !== undefined) params.prompt = parsePrompt(strings.prompt);
  if (strings.login_hint !== undefined) {
    if (!LOGIN_HINT.test(strings.login_hint)) throw bad('login_hint', 'at most 256 visible characters without quotes or brackets');
    params.loginHint = strings.login_hint;
  }
  if (strings.ui_locales !== undefined) {
    params.uiLocales = tokens(strings.ui_locales, 'ui_locales', MAX_LOCALES, (t) => LOCALE.test(t), 'space-separated language tags');
  }
  if (strings.acr_values !== undefined) {
    const acrValues = acrList(strings.acr_values);
    if (!acrValues) throw bad('acr_values', `at most ${MAX_ACR_VALUES} space-separated values of URI characters`);
    params.acrValues = acrValues;
  }
  if (strings.max_age !== undefined) {
    const seconds = parseMaxAge(strings.max_age);
    if (seconds === undefined) throw bad('max_age', `a whole number of seconds from 0 to ${MAX_AGE_LIMIT_SECONDS}`);
    params.maxAge = seconds;
  }
  if (strings.returnTo !== undefined && strings.returnTo.length > 2048) throw new GatewayError('invalid_return_to');
  if (strings.bounce !== undefined && !BOUNCE.test(strings.bounce)) throw bad('bounce', 'the value of the page that sent it');
  return { returnTo: strings.returnTo, params, ...(strings.bounce !== undefined ? { bounce: strings.bounce } : {}) };
}
