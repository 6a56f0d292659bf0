/**
 * Provider answers read up to a limit (src/oidc/bounded-fetch.ts): refused by a declared
 * Content-Length before any of the body is read, or cut as it streams past the limit; smaller
 * answers pass unchanged, their URL kept. The fetch is a stand-in: what matters is what the
 * wrapper does with the Response it gets.
 *
 * Fails if, in boundedFetch, the Content-Length check goes (`declared > limit` → `false`): the
 * first case then reads the body (the integration tests' front streams every answer chunked,
 * so only this test pins it), or if the counting stream goes (the second case).
 */
import { ANSWER_TOO_LARGE, boundedFetch } from '../../../src/oidc/bounded-fetch.js';

const LIMIT = 1024;

function answering(make: () => Response) {
  let bodyRead = false;
  const fetch = async (_url: string, _options: RequestInit): Promise<Response> => {
    const response = make();
    const reader = response.body;
    if (!reader) return response;
    // Notes whether anything pulled the body.
    const watched = reader.pipeThrough(new TransformStream({ transform: (chunk, c) => void ((bodyRead = true), c.enqueue(chunk)) }));
    const copy = new Response(watched, { status: response.status, headers: response.headers });
    return Object.defineProperty(copy, 'url', { value: 'https://idp.example/token' });
  };
  return { fetch: boundedFetch(fetch, LIMIT), bodyRead: () => bodyRead };
}

const failure = async (promise: Promise<unknown>) => promise.then(() => undefined, (e: unknown) => e as { code?: string; cause?: { code?: string } });

describe('boundedFetch', () => {
  it('refuses an answer whose Content-Length is past the limit, without reading its body', async () => {
    const { fetch, bodyRead } = answering(() => new Response('x'.repeat(LIMIT + 1), { headers: { 'content-length': String(LIMIT + 1) } }));
    const err = await failure(fetch('https://idp.example/token', {}));
    expect(err?.code).toBe(ANSWER_TOO_LARGE);
    expect(bodyRead()).toBe(false);
  });

  it('cuts a body that streams past the limit (no Content-Length)', async () => {
    const chunks = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 4; i++) c.enqueue(new Uint8Array(LIMIT / 2));
        c.close();
      },
    });
    const { fetch } = answering(() => new Response(chunks));
    const response = await fetch('https://idp.example/token', {});
    const err = await failure(response.arrayBuffer());
    expect(err?.code ?? err?.cause?.code).toBe(ANSWER_TOO_LARGE);
  });

  it('passes an answer within the limit unchanged, its status, headers and URL kept', async () => {
    const { fetch } = answering(() => new Response('{"ok":true}', { status: 201, headers: { 'content-type': 'application/json' } }));
    const response = await fetch('https://idp.example/token', {});
    expect(response.status).toBe(201);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(response.url).toBe('https://idp.example/token');
    expect(await response.json()).toEqual({ ok: true });
  });
});
