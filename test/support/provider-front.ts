/**
 * A small tampering front for the test provider: an HTTP server on 127.0.0.1 whose URL is the
 * provider's issuer, forwarding every request to the real provider behind it, except those a
 * test chooses to answer itself (a token endpoint failing in a way oidc-provider never fails,
 * a JWKS or metadata document of the test's making). It records what it saw, so a test can
 * count what reached "the provider" (e.g. JWKS fetches).
 *
 *   const front = await startProviderFront();
 *   const provider = await startFrontedProvider(front, { clients: [gatewayClient(url)] });
 *   front.intercept((req) => (isRefresh(req) ? { status: 400 } : undefined));
 *
 * The backend can be swapped (`forwardTo`) with the issuer unchanged: that is how a provider
 * restarted with rotated keys looks to its clients.
 */
import http from 'node:http';
import { listenOnLoopback } from './listen.js';
import { startTestProvider, type TestProvider, type TestProviderOptions } from './oidc-provider.js';

export interface FrontRequest {
  method: string;
  /** Path without the query. */
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The body as a form (empty unless it is application/x-www-form-urlencoded). */
  form: URLSearchParams;
}

export interface FrontAnswer {
  status: number;
  headers?: Record<string, string>;
  /** Default: no body at all. */
  body?: string | Buffer;
  /** Cut the connection instead of answering (a provider host that resets). */
  reset?: true;
  /** Send the head at once, then the body a byte every this many ms (a provider stalling mid-answer). */
  dripMs?: number;
}

function drip(res: http.ServerResponse, answer: FrontAnswer & { dripMs: number }): void {
  const body = Buffer.from(answer.body ?? '');
  res.writeHead(answer.status, answer.headers);
  let sent = 0;
  const timer = setInterval(() => {
    if (sent >= body.length) {
      clearInterval(timer);
      res.end();
      return;
    }
    res.write(body.subarray(sent, sent + 1));
    sent += 1;
  }, answer.dripMs);
  res.on('close', () => clearInterval(timer));
}

/**
 * Answers a request itself, or returns undefined to forward it to the provider. It may be async,
 * e.g. to stop something before the provider sees the request.
 */
export type Interceptor = (req: FrontRequest) => FrontAnswer | undefined | Promise<FrontAnswer | undefined>;

export interface ProviderFront {
  url: string;
  port: number;
  /** Every request, in arrival order (answered or forwarded). */
  readonly requests: readonly FrontRequest[];
  count(method: string, path: string): number;
  /** Resolves once `count` requests matching `predicate` have arrived in all (bounded wait). */
  waitFor(predicate: (req: FrontRequest) => boolean, count?: number, timeoutMs?: number): Promise<void>;
  /**
   * The provider's own answer to `req` (an interceptor's request), for the interceptor to edit:
   * status, content type and body (a provider answering differently from oidc-provider).
   */
  ask(req: FrontRequest): Promise<FrontAnswer & { body: Buffer }>;
  /** Replaces the interceptor; undefined forwards everything again. */
  intercept(interceptor: Interceptor | undefined): void;
  /** The port of the provider to forward to, on 127.0.0.1. */
  forwardTo(port: number): void;
  close(): Promise<void>;
}

/** `{ status, error JSON }` as an OAuth token endpoint answers an error (RFC 6749 §5.2). */
export function oauthError(status: number, error: string, description?: string): FrontAnswer {
  return {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
    body: JSON.stringify({ error, ...(description ? { error_description: description } : {}) }),
  };
}

/** A token endpoint request for this grant type. */
export function isGrant(req: FrontRequest, grantType: string): boolean {
  return req.method === 'POST' && req.path === '/token' && req.form.get('grant_type') === grantType;
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function parsed(req: http.IncomingMessage, body: Buffer): FrontRequest {
  const url = new URL(req.url ?? '/', 'http://front.invalid');
  const isForm = (req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded');
  return {
    method: req.method ?? 'GET',
    path: url.pathname,
    query: url.searchParams,
    headers: req.headers,
    body,
    form: new URLSearchParams(isForm ? body.toString('utf8') : ''),
  };
}

function forward(req: http.IncomingMessage, body: Buffer, res: http.ServerResponse, port: number): void {
  const upstream = http.request(
    { host: '127.0.0.1', port, method: req.method, path: req.url, headers: req.headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.rawHeaders);
      answer.pipe(res);
    },
  );
  // The provider is down (stopped): the front answers like a dead gateway would.
  upstream.on('error', () => {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  });
  upstream.end(body);
}

export async function startProviderFront(): Promise<ProviderFront> {
  const requests: FrontRequest[] = [];
  const waiters = new Set<() => void>();
  let interceptor: Interceptor | undefined;
  let target: number | undefined;
  const server = http.createServer((req, res) => {
    readBody(req).then(
      async (body) => {
        const seen = parsed(req, body);
        requests.push(seen);
        for (const check of [...waiters]) check();
        const answer = await interceptor?.(seen);
        if (answer?.reset) {
          req.socket.destroy();
        } else if (answer?.dripMs !== undefined) {
          drip(res, { ...answer, dripMs: answer.dripMs });
        } else if (answer) {
          res.writeHead(answer.status, answer.headers).end(answer.body);
        } else if (target === undefined) {
          res.writeHead(502).end();
        } else {
          forward(req, body, res, target);
        }
      },
      () => res.destroy(),
    );
  });
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    count: (method, path) => requests.filter((r) => r.method === method && r.path === path).length,
    waitFor(predicate, count = 1, timeoutMs = 10_000) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (requests.filter(predicate).length < count) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`provider front: ${count} matching requests did not arrive within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    ask(req) {
      return new Promise((resolve, reject) => {
        if (target === undefined) return reject(new Error('provider front: no provider to ask'));
        const search = req.query.toString();
        const asked = http.request(
          { host: '127.0.0.1', port: target, method: req.method, path: `${req.path}${search ? `?${search}` : ''}`, headers: req.headers },
          (answer) => {
            const chunks: Buffer[] = [];
            answer.on('data', (c: Buffer) => chunks.push(c));
            answer.on('end', () => {
              const type = answer.headers['content-type'];
              resolve({ status: answer.statusCode ?? 502, headers: type ? { 'content-type': type } : {}, body: Buffer.concat(chunks) });
            });
            answer.on('error', reject);
          },
        );
        asked.on('error', reject);
        asked.end(req.body);
      });
    },
    intercept(next) {
      interceptor = next;
    },
    forwardTo(next) {
      target = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A test provider whose issuer is the front's URL, with the front forwarding to it. */
export async function startFrontedProvider(front: ProviderFront, opts: Omit<TestProviderOptions, 'publicIssuer'>): Promise<TestProvider> {
  const provider = await startTestProvider({ ...opts, publicIssuer: front.url });
  front.forwardTo(provider.port);
  return provider;
}
