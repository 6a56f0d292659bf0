// A real upstream HTTP (and WebSocket) server for proxy tests: it records exactly what the
// gateway forwarded and can stream, stall or disappear on demand.
//
// Routes match on the END of the path, so they work whether the gateway strips its route
// prefix or keeps it: `/echo`, `/api/echo` and `/api/v1/echo` are all the echo route.
//   GET  .../echo                 200 JSON { method, url, headers, rawHeaders }
//   ANY  .../upload               streams the body, counting it: 200 JSON { bytes }
//   GET  .../download?bytes=N     N bytes (Content-Length: N) in 64 KiB chunks, with backpressure
//   GET  .../sse                  text/event-stream: `data: first` now, `data: last` on release or after 10 s
//   ANY  .../sse-release          ends every open .../sse response: 200 JSON { released }
//   GET  .../slow?ms=N            200 JSON { ms } after N ms (at most 30 s)
//   ANY  .../status/CODE          that status (200-599); 401 carries WWW-Authenticate: Bearer error="invalid_token"
//   ANY  .../set-cookie           200 with Set-Cookie: upstream_cookie=1; Path=/; HttpOnly
//   anything else                 200 echo, answered once the request body has been read
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { WebSocketServer } from 'ws';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  rawHeaders: string[];
  /** Grows while the body is read; final once the response to a body-reading route is sent. */
  bodyBytes: number;
}

export interface WsConnection {
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

export interface Upstream {
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** Empties requests and wsConnections in place, so references held by a test stay live. */
  reset(): void;
  setHandler(h: ((req: IncomingMessage, res: ServerResponse) => void) | undefined): void;
  close(): Promise<void>;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** WebSocket handshakes (only with `websocket: true`; they are not in `requests`). */
  wsConnections: WsConnection[];
  /** WebSockets open right now (only with `websocket: true`): those not yet closed by either side. */
  readonly openWebSockets: number;
}

const HOST = '127.0.0.1';
const CHUNK = 64 * 1024;
const SSE_MAX_MS = 10_000;
const SLOW_MAX_MS = 30_000;

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function afterBody(req: IncomingMessage, fn: () => void): void {
  if (req.readableEnded) fn();
  else req.once('end', fn);
  req.resume();
}

async function streamBytes(res: ServerResponse, total: number): Promise<void> {
  // One shared chunk: a download of N bytes never allocates N bytes.
  const chunk = Buffer.alloc(CHUNK, 'x');
  let left = total;
  while (left > 0 && !res.destroyed) {
    const n = Math.min(left, CHUNK);
    left -= n;
    if (!res.write(n === CHUNK ? chunk : chunk.subarray(0, n))) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    }
  }
  if (!res.destroyed) res.end();
}

class UpstreamServer implements Upstream {
  readonly requests: RecordedRequest[] = [];
  readonly wsConnections: WsConnection[] = [];
  port = 0;
  private handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  private readonly server: http.Server;
  private readonly wss: WebSocketServer | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly sseWaiters = new Set<() => void>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private listening = false;
  private closing: Promise<void> | undefined;

  private readonly host: string;

  constructor(websocket: boolean, host = HOST) {
    this.host = host;
    this.server = http.createServer((req, res) => this.onRequest(req, res));
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    if (websocket) {
      const wss = new WebSocketServer({ noServer: true });
      this.wss = wss;
      this.server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
        this.wsConnections.push({ url: req.url ?? '', headers: { ...req.headers } });
        wss.handleUpgrade(req, socket, head, (ws) => {
          ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
        });
      });
    } else {
      // Recorded, then refused: a test can tell "forwarded and refused" from "never forwarded".
      this.server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
        this.record(req);
        socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      });
    }
  }

  get url(): string {
    return `http://${this.host.includes(':') ? `[${this.host}]` : this.host}:${this.port}`;
  }

  get openWebSockets(): number {
    return this.wss?.clients.size ?? 0;
  }

  reset(): void {
    this.requests.length = 0;
    this.wsConnections.length = 0;
  }

  setHandler(h: ((req: IncomingMessage, res: ServerResponse) => void) | undefined): void {
    this.handler = h;
  }

  start(): Promise<void> {
    if (this.closing) return Promise.reject(new Error('upstream is closed'));
    if (this.listening) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.server.once('error', onError);
      // port 0 the first time; afterwards the same port, so a stopped upstream comes back where
      // the gateway's config points.
      this.server.listen(this.port, this.host, () => {
        this.server.off('error', onError);
        const addr = this.server.address();
        if (addr && typeof addr === 'object') this.port = addr.port;
        this.listening = true;
        resolve();
      });
    });
  }

  async stop(): Promise<void> {
    if (!this.listening) return;
    this.listening = false;
    for (const release of this.sseWaiters) release();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    // server.close() waits for keep-alive and upgraded sockets; destroying them is what makes
    // stop() bounded and the port refuse connections at once.
    for (const client of this.wss?.clients ?? []) client.terminate();
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.stop();
      await new Promise<void>((resolve) => (this.wss ? this.wss.close(() => resolve()) : resolve()));
    })();
    return this.closing;
  }

  private record(req: IncomingMessage): RecordedRequest {
    const rec: RecordedRequest = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: { ...req.headers },
      rawHeaders: [...req.rawHeaders],
      bodyBytes: 0,
    };
    this.requests.push(rec);
    // Counting at emit time sees every byte whoever reads the body (our routes, a custom
    // handler's pipe() or async iterator) without consuming it ourselves.
    const emit = req.emit.bind(req);
    req.emit = ((event: string | symbol, ...args: unknown[]): boolean => {
      if (event === 'data' && args[0] instanceof Uint8Array) rec.bodyBytes += args[0].byteLength;
      else if (event === 'data' && typeof args[0] === 'string') rec.bodyBytes += Buffer.byteLength(args[0]);
      return emit(event, ...args);
    }) as typeof req.emit;
    return rec;
  }

  private later(ms: number, fn: () => void): NodeJS.Timeout {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
    return t;
  }

  private forget(t: NodeJS.Timeout): void {
    clearTimeout(t);
    this.timers.delete(t);
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const rec = this.record(req);
    const handler = this.handler;
    if (handler) {
      try {
        handler(req, res);
      } catch (err) {
        if (!res.headersSent) json(res, 500, { error: String(err) });
        else res.destroy();
      }
      return;
    }
    this.route(req, res, rec);
  }

  private route(req: IncomingMessage, res: ServerResponse, rec: RecordedRequest): void {
    const url = new URL(req.url ?? '/', 'http://upstream.invalid');
    const p = url.pathname;
    const echo = (): void =>
      afterBody(req, () => json(res, 200, { method: rec.method, url: rec.url, headers: rec.headers, rawHeaders: rec.rawHeaders }));

    let m: RegExpExecArray | null;
    if (/\/upload$/.test(p)) {
      afterBody(req, () => json(res, 200, { bytes: rec.bodyBytes }));
    } else if (/\/download$/.test(p) && req.method === 'GET') {
      req.resume();
      const bytes = Number(url.searchParams.get('bytes') ?? '0');
      if (!Number.isSafeInteger(bytes) || bytes < 0) return json(res, 400, { error: 'bytes must be a non-negative integer' });
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': bytes });
      void streamBytes(res, bytes);
    } else if (/\/sse-release$/.test(p)) {
      const released = this.sseWaiters.size;
      for (const release of this.sseWaiters) release();
      afterBody(req, () => json(res, 200, { released }));
    } else if (/\/sse$/.test(p) && req.method === 'GET') {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      res.write('data: first\n\n');
      const release = (): void => {
        this.sseWaiters.delete(release);
        this.forget(timer);
        if (!res.destroyed) res.end('data: last\n\n');
      };
      const timer = this.later(SSE_MAX_MS, release);
      this.sseWaiters.add(release);
      res.once('close', () => {
        this.sseWaiters.delete(release);
        this.forget(timer);
      });
    } else if (/\/slow$/.test(p) && req.method === 'GET') {
      req.resume();
      const ms = Math.min(Math.max(Number(url.searchParams.get('ms') ?? '0') || 0, 0), SLOW_MAX_MS);
      const timer = this.later(ms, () => json(res, 200, { ms }));
      res.once('close', () => this.forget(timer));
    } else if ((m = /\/status\/(\d{3})$/.exec(p))) {
      const code = Number(m[1]);
      if (code < 200 || code > 599) return afterBody(req, () => json(res, 400, { error: 'status must be 200-599' }));
      afterBody(req, () => {
        if (code === 401) res.setHeader('www-authenticate', 'Bearer error="invalid_token"');
        if (code === 204 || code === 304) {
          res.writeHead(code);
          res.end();
        } else json(res, code, { status: code });
      });
    } else if (/\/set-cookie$/.test(p)) {
      res.setHeader('set-cookie', 'upstream_cookie=1; Path=/; HttpOnly');
      afterBody(req, () => json(res, 200, { cookie: 'upstream_cookie' }));
    } else {
      echo();
    }
  }
}

/** `host`: the loopback address to listen on (default 127.0.0.1; '::1' for an IPv6 upstream). */
export async function startUpstream(opts: { websocket?: boolean; host?: '127.0.0.1' | '::1' } = {}): Promise<Upstream> {
  const upstream = new UpstreamServer(opts.websocket ?? false, opts.host);
  await upstream.start();
  return upstream;
}

/**
 * Answers `res` with `headers` and a `first` chunk and keeps it open: only a cut (or the test)
 * ends it. It is in `open` until it closes, for the test to cut what is left.
 */
export function holdOpen(res: ServerResponse, open: Set<ServerResponse>, headers: http.OutgoingHttpHeaders, first: string): void {
  res.writeHead(200, headers);
  res.write(first);
  open.add(res);
  res.once('close', () => open.delete(res));
}
