/**
 * What of a provider's answer reaches the log through an error's cause chain.
 *
 * A token endpoint answering `application/json` with a body that is not JSON makes oauth4webapi
 * throw OperationProcessingError, whose cause is JSON.parse's SyntaxError, and V8 quotes the
 * body in that message (all of a short one, ten characters either side of the fault in a long
 * one). The refresh failure is logged at warn (src/http/error-handler.ts) with its causes.
 *
 * Parsed in this test's realm, as undici does in a one-realm process: through Jest's own fetch
 * the SyntaxError comes from another realm, which `instanceof Error` does not see, and the path
 * would hide what production logs. The real oauth4webapi, error mapping and logger.
 *
 * Fails if, in src/observability/logger.ts serializeError, a SyntaxError's message is kept
 * (`err.name === QUOTES_ITS_INPUT ? ... :` removed).
 */
import { runInNewContext } from 'node:vm';
import * as oauth from 'oauth4webapi';
import { fromRefreshError } from '../../../src/oidc/errors.js';
import { createLogger } from '../../../src/observability/logger.js';

/** A token response whose json() parses in this realm. */
function sameRealmAnswer(body: string): Response {
  const answer = new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });
  return Object.defineProperty(answer, 'json', { value: async () => JSON.parse(await answer.text()) as unknown });
}

async function loggedFor(body: string): Promise<string> {
  const lines: string[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (line: string) => void lines.push(line) } });
  const as = { issuer: 'https://idp.example', token_endpoint: 'https://idp.example/token' };
  const err = await oauth.processRefreshTokenResponse(as, { client_id: 'c' }, sameRealmAnswer(body)).then(
    () => undefined,
    (e: unknown) => e,
  );
  const error = fromRefreshError(err);
  expect(error.code).toBe('token_refresh_failed');
  logger.warn({ err: error, code: error.code }, 'request failed');
  return lines.join('');
}

describe('the log of a provider answer that is not JSON', () => {
  it('keeps the error types and codes, and none of a short body', async () => {
    const log = await loggedFor('rt_SECRET42');
    expect(log).not.toContain('rt_SECRET42');
    expect(log).toContain('"type":"SyntaxError"');
    expect(log).toContain('OAUTH_PARSE_ERROR');
  });

  it('none of a long body around the fault either', async () => {
    expect(await loggedFor('{"access_token":"a","refresh_token":RTsecretXYZ123456}')).not.toContain('RTsecret');
  });
});

// Found by the TLS red team: the `*.code` redaction, meant for authorization codes, hid every
// error's code (CERT_HAS_EXPIRED, ECONNREFUSED) from operators. Fails if serializeError puts
// every code under `code` (`isErrorCodeName(code)` → `false`).
describe('error codes in the log', () => {
  const logged = (err: unknown): string => {
    const lines: string[] = [];
    createLogger({ destination: { write: (line: string) => void lines.push(line) } }).warn({ err }, 'failed');
    return lines.join('');
  };

  it("shows a Node or library code, and its cause's", () => {
    const cause = Object.assign(new Error('certificate has expired'), { code: 'CERT_HAS_EXPIRED' });
    const log = logged(new TypeError('fetch failed', { cause }));
    expect(log).toContain('"errorCode":"CERT_HAS_EXPIRED"');
  });

  // An upstream that died mid-answer was logged as `{"type":"object","message":"non-error
  // thrown"}`: Node's socket error is not `instanceof` the Error of the realm the gateway runs in
  // (Jest's here, an embedder's vm context). Fails if serializeError tests `instanceof Error` alone.
  it("shows an error from another realm, its code and its cause's, as any other", () => {
    const foreign = runInNewContext(
      "const cause = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }); new TypeError('socket hang up', { cause })",
    ) as unknown;
    expect(foreign instanceof Error).toBe(false);
    const log = JSON.parse(logged(foreign)) as { err: unknown };
    expect(log.err).toEqual({ type: 'TypeError', message: 'socket hang up', cause: { type: 'Error', message: 'read ECONNRESET', errorCode: 'ECONNRESET' } });
  });

  it('keeps hiding the message of a parse error from another realm', () => {
    const foreign = runInNewContext("try { JSON.parse('{rt_SECRET42') } catch (e) { e }") as unknown;
    expect(logged(foreign)).toContain('"type":"SyntaxError"');
    expect(logged(foreign)).not.toContain('rt_SECRET42');
  });

  // Found by review: the `*.code` redaction path reaches the top of the line only, so a cause's
  // code that is no code-shaped constant was logged in clear. Fails if serializeError keeps such a
  // code as it is (`{ code: REDACTED }` → `{ code }`).
  it("redacts a cause's code and OAuth error too, at any depth", () => {
    const cause = Object.assign(new Error('x'), { code: 'invalid_grant rt_SECRET42' });
    const deeper = Object.assign(new Error('y'), { error: 'invalid_grant rt_SECRET43' });
    const log = logged(new TypeError('outer', { cause: new Error('middle', { cause: Object.assign(cause, { cause: deeper }) }) }));
    expect(log).not.toContain('rt_SECRET42');
    expect(log).not.toContain('rt_SECRET43');
    expect(log).toContain('"code":"[redacted]"');
  });

  it('redacts any other code, and a provider\'s OAuth error, which may quote what it was sent', () => {
    expect(logged(Object.assign(new Error('x'), { code: 'refresh rt_SECRET42' }))).not.toContain('rt_SECRET42');
    expect(logged(Object.assign(new Error('x'), { error: 'invalid_grant rt_SECRET42' }))).not.toContain('rt_SECRET42');
  });
});
