/**
 * Raw HTTP/1.1 exchanges on a net.Socket: the request target goes out byte for byte as given
 * (fetch, http.request and WebSocket clients normalise or refuse what these tests must send:
 * dot segments, `..;`, absolute-form targets, upgrade heads). One connection per exchange.
 */
import net from 'node:net';

export interface RawResponse {
  status: number;
  statusLine: string;
  /** Header names lowercased, every value kept. */
  rawHeaders: [string, string][];
  /** For expectErrorBody and friends. */
  headers: Headers;
  text: string;
}

export interface RawRequest {
  method?: string;
  target: string;
  headers?: Record<string, string>;
  /** Resolve as soon as a 101 head has arrived (the socket is then destroyed). */
  upgrade?: boolean;
  /** Bounded wait for the whole answer (default 10 s): a hang fails, never blocks the run. */
  deadlineMs?: number;
}

function parse(buffer: Buffer): { head: string; body: Buffer } | undefined {
  const end = buffer.indexOf('\r\n\r\n');
  if (end === -1) return undefined;
  return { head: buffer.subarray(0, end).toString('latin1'), body: buffer.subarray(end + 4) };
}

function toResponse(head: string, body: Buffer): RawResponse {
  const [statusLine = '', ...lines] = head.split('\r\n');
  const rawHeaders = lines.map((line): [string, string] => {
    const colon = line.indexOf(':');
    return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
  });
  const headers = new Headers();
  for (const [name, value] of rawHeaders) headers.append(name, value);
  return { status: Number(statusLine.split(' ')[1]), statusLine, rawHeaders, headers, text: body.toString('utf8') };
}

/** Sends one request on a fresh connection to `baseUrl` and reads the answer. */
export function rawExchange(baseUrl: string, request: RawRequest): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl);
  const headers: Record<string, string> = { host: `${hostname}:${port}`, ...request.headers };
  if (!request.upgrade && !Object.keys(headers).some((h) => h.toLowerCase() === 'connection')) headers.connection = 'close';
  let text = `${request.method ?? 'GET'} ${request.target} HTTP/1.1\r\n`;
  for (const [name, value] of Object.entries(headers)) text += `${name}: ${value}\r\n`;
  text += '\r\n';

  return new Promise<RawResponse>((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => finish(new Error(`no complete answer within the deadline to ${request.target}`)), request.deadlineMs ?? 10_000);
    let done = false;
    function finish(err?: Error, response?: RawResponse): void {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(response as RawResponse);
    }
    const check = (ended: boolean): void => {
      const parsed = parse(Buffer.concat(chunks));
      if (!parsed) {
        if (ended) finish(new Error(`connection closed without an answer to ${request.target}`));
        return;
      }
      const response = toResponse(parsed.head, parsed.body);
      if (response.status === 101 && request.upgrade) return finish(undefined, response);
      const length = response.headers.get('content-length');
      if (ended || (length !== null && parsed.body.length >= Number(length))) finish(undefined, toResponse(parsed.head, parsed.body));
    };
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      check(false);
    });
    socket.on('end', () => check(true));
    socket.on('close', () => check(true));
    socket.on('error', (err) => (chunks.length > 0 ? check(true) : finish(err)));
    socket.write(text, 'latin1');
  });
}
