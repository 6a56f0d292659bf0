/**
 * The suite's one raw HTTP/1.1 client, on a net.Socket: the request target and headers go out
 * byte for byte as given (fetch, http.request and WebSocket clients normalise or refuse what
 * these tests must send: dot segments, `..;`, absolute-form targets, invalid header bytes,
 * upgrade heads). One connection per exchange, closed afterwards unless `keepOpen`.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';

export interface RawResponse {
  status: number;
  statusLine: string;
  /** Header names lowercased, every value kept, in order. */
  rawHeaders: [string, string][];
  /** For expectErrorBody and friends (repeated headers joined by ", "). */
  headers: Headers;
  /** The body, de-chunked when the answer was chunked. */
  body: Buffer;
  /** The body as UTF-8. */
  text: string;
  /** performance.now() when the answer was complete. */
  at: number;
  /** With `keepOpen`: the connection, still open, for the caller to reuse or destroy. */
  socket?: net.Socket;
}

export interface RawRequest {
  method?: string;
  /** The request target, as latin1 bytes (see `latin1Bytes`). */
  target: string;
  /** In order, duplicates allowed as pairs; latin1. Host is added when absent, Connection: close unless one is given. */
  headers?: Record<string, string> | Array<[string, string]>;
  /** Sent after the head with a Content-Length (unless one is given); a string counts as latin1 bytes. */
  body?: string | Buffer;
  /** Resolve as soon as a 101 head has arrived (the socket is then destroyed). */
  upgrade?: boolean;
  /** Send Connection: keep-alive and hand the open socket back with the answer. */
  keepOpen?: boolean;
  /** Bounded wait for the whole answer (default 10 s): a hang fails, never blocks the run. */
  deadlineMs?: number;
  /** Called with the (de-chunked) body so far as it arrives (once complete when it has a Content-Length), e.g. to act on a streamed answer's first event. */
  onBody?: (textSoFar: string) => void;
}

/** A Unicode string as its UTF-8 bytes, one latin1 char per byte (for `target` and header values). */
export const latin1Bytes = (s: string): string => Buffer.from(s, 'utf8').toString('latin1');

/** Every value of one header, in order (`headers.get` would join them). */
export function headerValues(res: RawResponse, name: string): string[] {
  const lower = name.toLowerCase();
  return res.rawHeaders.filter(([n]) => n === lower).map(([, v]) => v);
}

/** The answer's headers as node:http gives them (set-cookie an array, repeats otherwise joined). */
export function incomingHeaders(res: RawResponse): http.IncomingHttpHeaders {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of res.rawHeaders) {
    const prior = out[name];
    if (name === 'set-cookie') out[name] = [...((prior as string[] | undefined) ?? []), value];
    else out[name] = prior === undefined ? value : `${prior as string}, ${value}`;
  }
  return out;
}

function dechunk(body: Buffer): Buffer {
  const out: Buffer[] = [];
  let i = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', i);
    if (eol < 0) break;
    const size = parseInt(body.subarray(i, eol).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    out.push(body.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

interface Parsed {
  response: RawResponse;
  /** The body bytes as they arrived (still chunked), to tell whether the answer is complete. */
  wire: Buffer;
}

/** The final answer in `raw` (1xx interim answers skipped, except 101 when upgrading), if its head is complete. */
function parse(raw: Buffer, upgrade: boolean): Parsed | undefined {
  let rest = raw;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end === -1) return undefined;
    const [statusLine = '', ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n');
    const wire = rest.subarray(end + 4);
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? NaN);
    if (status >= 100 && status < 200 && !(status === 101 && upgrade)) {
      rest = wire;
      continue;
    }
    const rawHeaders = lines
      .filter((line) => line.includes(':'))
      .map((line): [string, string] => {
        const colon = line.indexOf(':');
        return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
      });
    const headers = new Headers();
    for (const [name, value] of rawHeaders) {
      try {
        headers.append(name, value);
      } catch {
        // A header fetch's Headers refuses (invalid bytes) stays in rawHeaders only.
      }
    }
    const chunked = rawHeaders.some(([n, v]) => n === 'transfer-encoding' && /chunked/i.test(v));
    const body = chunked ? dechunk(wire) : wire;
    return { response: { status, statusLine, rawHeaders, headers, body, text: body.toString('utf8'), at: performance.now() }, wire };
  }
}

function complete({ response, wire }: Parsed): boolean {
  const length = response.headers.get('content-length');
  if (length !== null && /^\d+$/.test(length)) return wire.length >= Number(length);
  if (response.rawHeaders.some(([n, v]) => n === 'transfer-encoding' && /chunked/i.test(v))) return wire.includes('0\r\n\r\n');
  return response.status === 204 || response.status === 304;
}

function headText(baseUrl: URL, request: RawRequest, body: Buffer | undefined): string {
  const pairs: Array<[string, string]> = Array.isArray(request.headers) ? [...request.headers] : Object.entries(request.headers ?? {});
  const has = (name: string) => pairs.some(([n]) => n.toLowerCase() === name);
  if (!has('host')) pairs.unshift(['host', `${baseUrl.hostname}:${baseUrl.port}`]);
  if (body && !has('content-length') && !has('transfer-encoding')) pairs.push(['content-length', String(body.length)]);
  if (!request.upgrade && !has('connection')) pairs.push(['connection', request.keepOpen ? 'keep-alive' : 'close']);
  let text = `${request.method ?? 'GET'} ${request.target} HTTP/1.1\r\n`;
  for (const [name, value] of pairs) text += `${name}: ${value}\r\n`;
  return `${text}\r\n`;
}

/**
 * Sends one request on a fresh connection to `baseUrl` and reads the answer. An answer whose
 * head arrived counts even if the peer then closes or resets the connection; with none, the
 * socket's error (its `code`, e.g. ECONNREFUSED), ECONNRESET for a close without a byte (as
 * node:http reports it), or a description of what arrived is the failure.
 */
export function rawExchange(baseUrl: string, request: RawRequest): Promise<RawResponse> {
  const base = new URL(baseUrl);
  const body = request.body === undefined ? undefined : Buffer.isBuffer(request.body) ? request.body : Buffer.from(request.body, 'latin1');
  const head = headText(base, request, body);
  const ms = request.deadlineMs ?? 10_000;

  return new Promise<RawResponse>((resolve, reject) => {
    const socket = net.connect({ host: base.hostname, port: Number(base.port) });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => fail(new Error(`no complete answer within ${ms} ms to ${request.method ?? 'GET'} ${request.target}`)), ms);
    let done = false;
    function settle(response: RawResponse | undefined, err?: Error): void {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (response && request.keepOpen && !request.upgrade) {
        resolve({ ...response, socket });
        return;
      }
      socket.destroy();
      if (response) resolve(response);
      else reject(err);
    }
    function fail(err: Error): void {
      settle(undefined, err);
    }
    let received = 0;
    /** Bytes the whole answer takes, once a head with Content-Length was read: no re-parsing of a large body per chunk. */
    let expected: number | undefined;
    const check = (ended: boolean, err?: Error): void => {
      if (!ended && expected !== undefined && received < expected) return;
      const raw = Buffer.concat(chunks);
      const parsed = parse(raw, request.upgrade === true);
      if (!parsed) {
        if (ended) {
          if (err && chunks.length === 0) return fail(err);
          // Closed before a single byte came back: what node:http calls a hang-up (ECONNRESET).
          if (chunks.length === 0) return fail(Object.assign(new Error(`socket hang up: no answer to ${request.method ?? 'GET'} ${request.target.slice(0, 200)}`), { code: 'ECONNRESET' }));
          const what = err ? err.message : 'connection closed';
          fail(new Error(`no HTTP answer (${what}) to ${request.method ?? 'GET'} ${request.target.slice(0, 200)}; got ${JSON.stringify(raw.toString('latin1').slice(0, 200))}`));
        }
        return;
      }
      if (parsed.response.status === 101 && request.upgrade) return settle(parsed.response);
      request.onBody?.(parsed.response.text);
      if (ended || complete(parsed)) return settle(parsed.response);
      const length = parsed.response.headers.get('content-length');
      if (length !== null && /^\d+$/.test(length)) expected = raw.length - parsed.wire.length + Number(length);
    };
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.length;
      check(false);
    });
    socket.on('end', () => check(true));
    socket.on('close', () => check(true));
    socket.on('error', (err) => check(true, err));
    socket.once('connect', () => {
      socket.write(head, 'latin1');
      if (body) socket.write(body);
    });
  });
}

/**
 * A raw WebSocket upgrade to `target`: a valid handshake (a fresh key, version 13), then
 * `headers` (Origin, cookie, trace context…; a header given twice wins). Resolves on the 101 head
 * or on the refusal's whole answer.
 */
export function rawUpgrade(baseUrl: string, target: string, headers: Record<string, string> = {}, options: { deadlineMs?: number } = {}): Promise<RawResponse> {
  return rawExchange(baseUrl, {
    target,
    upgrade: true,
    headers: {
      upgrade: 'websocket',
      connection: 'Upgrade',
      'sec-websocket-key': randomBytes(16).toString('base64'),
      'sec-websocket-version': '13',
      ...headers,
    },
    ...options,
  });
}
