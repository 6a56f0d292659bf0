/**
 * Long-lived client connections a test holds open through a gateway: a streaming GET (a proxied
 * event stream or download, or GET /auth/events, whose server-sent events are parsed) and a
 * WebSocket. Each reports how and when it closed, so a test can tell a cut from a clean end and
 * measure the time from a logout to the close. Every wait is bounded.
 */
import http from 'node:http';
import { WebSocket } from 'ws';
import { withTimeout } from './wait.js';

export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

export interface Closed {
  /** performance.now() at the close. */
  at: number;
  /** True for a clean end of the body; false for a cut connection. */
  complete: boolean;
}

export interface HeldStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body so far. */
  text(): string;
  /** The server-sent events so far (comment lines left out). */
  events(): SseEvent[];
  /** Resolves when an event of `type` has arrived (bounded). */
  waitForEvent(type: string, ms: number): Promise<SseEvent>;
  closed: Promise<Closed>;
  isClosed(): boolean;
  destroy(): void;
}

function parseEvents(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  for (const block of text.split('\n\n').slice(0, -1)) {
    let event = 'message';
    let id: string | undefined;
    const data: string[] = [];
    let any = false;
    for (const line of block.split('\n')) {
      if (line.startsWith(':') || line === '') continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
      else continue;
      any = true;
    }
    if (any && data.length > 0) events.push({ event, data: data.join('\n'), ...(id !== undefined ? { id } : {}) });
  }
  return events;
}

/** GET `url` and hold the answer open; resolves once the head is in (any status). */
export function openStream(url: string, headers: Record<string, string>, headMs = 15_000): Promise<HeldStream> {
  return withTimeout(
    new Promise<HeldStream>((resolve, reject) => {
      const req = http.get(url, { headers, agent: false });
      req.once('error', reject);
      req.once('response', (res) => {
        let body = '';
        let done = false;
        const waiters = new Set<() => void>();
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
          for (const w of [...waiters]) w();
        });
        const closed = new Promise<Closed>((settle) => {
          const finish = () => {
            if (done) return;
            done = true;
            settle({ at: performance.now(), complete: res.complete });
            for (const w of [...waiters]) w();
          };
          res.once('close', finish);
          res.once('error', finish);
          req.once('error', finish);
        });
        const stream: HeldStream = {
          status: res.statusCode ?? 0,
          headers: res.headers,
          text: () => body,
          events: () => parseEvents(body),
          waitForEvent(type, ms) {
            return withTimeout(
              new Promise<SseEvent>((found, fail) => {
                const check = () => {
                  const event = parseEvents(body).find((e) => e.event === type);
                  if (event) {
                    waiters.delete(check);
                    found(event);
                  } else if (done) {
                    waiters.delete(check);
                    fail(new Error(`stream closed without a ${type} event; got: ${body.slice(0, 500)}`));
                  }
                };
                waiters.add(check);
                check();
              }),
              ms,
              `event ${type}`,
            );
          },
          closed,
          isClosed: () => done,
          destroy: () => req.destroy(),
        };
        resolve(stream);
      });
    }),
    headMs,
    `response head of ${new URL(url).pathname}`,
  );
}

export interface HeldWebSocket {
  socket: WebSocket;
  closed: Promise<Closed>;
  isClosed(): boolean;
}

/** Opens a WebSocket (bounded) and holds it. */
export function openWebSocket(url: string, headers: Record<string, string>, openMs = 15_000): Promise<HeldWebSocket> {
  return withTimeout(
    new Promise<HeldWebSocket>((resolve, reject) => {
      const socket = new WebSocket(url, { headers });
      let done = false;
      const closed = new Promise<Closed>((settle) => {
        socket.once('close', (code) => {
          done = true;
          settle({ at: performance.now(), complete: code === 1000 });
        });
      });
      socket.on('error', (err) => {
        if (socket.readyState !== WebSocket.OPEN) reject(err);
      });
      socket.once('open', () => resolve({ socket, closed, isClosed: () => done }));
    }),
    openMs,
    `WebSocket ${new URL(url).pathname}`,
  );
}
