/**
 * Provider answers read with a size limit. openid-client and jose read each body whole
 * (Response.json()), bounded only by the provider timeout: at network speed, hundreds of
 * megabytes held per sign-in, refresh or key fetch. Metadata, key sets and token responses are
 * kilobytes; past the limit the answer is refused, and the call fails as one whose answer
 * could not be read (an outage: 503 at the callback, a session kept at a refresh).
 */

/** The most a provider answer may hold. */
export const MAX_PROVIDER_ANSWER_BYTES = 1024 * 1024;

/** Told apart by its code wherever a failed provider call is classified (oidc/errors.ts). */
export const ANSWER_TOO_LARGE = 'PROVIDER_ANSWER_TOO_LARGE';

const tooLarge = () => Object.assign(new Error(`the provider's answer is larger than ${MAX_PROVIDER_ANSWER_BYTES} bytes`), { code: ANSWER_TOO_LARGE });

type Fetch = (url: string, options: RequestInit) => Promise<Response>;

const globalFetch: Fetch = (url, options) => fetch(url, options);

/** `next` (the global fetch by default), its answers' bodies cut off past `limit` bytes (declared or counted). */
export function boundedFetch<F extends Fetch>(next: F = globalFetch as F, limit = MAX_PROVIDER_ANSWER_BYTES): F {
  const bounded = async (url: string, options: RequestInit): Promise<Response> => {
    const response = await next(url, options);
    const declared = Number(response.headers.get('content-length') ?? 0);
    if (declared > limit) {
      await response.body?.cancel();
      throw tooLarge();
    }
    if (!response.body) return response;
    let seen = 0;
    const counted = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          seen += chunk.byteLength;
          if (seen > limit) controller.error(tooLarge());
          else controller.enqueue(chunk);
        },
      }),
    );
    const answer = new Response(counted, { status: response.status, statusText: response.statusText, headers: response.headers });
    // What the new Response cannot be given: the readers may look at where the answer came from.
    return Object.defineProperties(answer, { url: { value: response.url }, redirected: { value: response.redirected } });
  };
  return bounded as F;
}
