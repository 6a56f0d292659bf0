/**
 * A TLS-terminating reverse proxy, as in production in front of the gateway: https on
 * 127.0.0.1 for the browser, plain http to the gateway, appending the client's address to
 * X-Forwarded-For and saying `X-Forwarded-Proto: https` (what nginx or a cloud load balancer
 * sends). Host passes through unchanged. It records what it forwarded, for assertions.
 */
import http from 'node:http';
import https from 'node:https';
import { closeServer, listenOnLoopback } from './listen.js';
import type { TlsCertificate } from './tls-cert.js';

/** RFC 9110 §7.6.1: these describe one connection, never forwarded by a proxy. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade']);

export interface ForwardedByHop {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

export interface TlsHop {
  /** https://127.0.0.1:<port>: the public origin. */
  url: string;
  port: number;
  forwarded: ForwardedByHop[];
  close(): Promise<void>;
}

export interface TlsHopOptions {
  certificate: TlsCertificate;
  /** The gateway, plain http. */
  target: string;
  /** Address the hop connects to the gateway from (a loopback alias), so its hop is distinguishable. */
  localAddress?: string;
}

function forwardHeaders(req: http.IncomingMessage): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(name)) out[name] = value;
  const prior = req.headers['x-forwarded-for'];
  const peer = req.socket.remoteAddress ?? '';
  out['x-forwarded-for'] = prior ? `${Array.isArray(prior) ? prior.join(', ') : prior}, ${peer}` : peer;
  out['x-forwarded-proto'] = 'https';
  return out;
}

/** Response headers without the hop-by-hop ones, as a flat raw list (repeated Set-Cookie kept). */
function responseHeaders(raw: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (!HOP_BY_HOP.has((raw[i] as string).toLowerCase())) out.push(raw[i] as string, raw[i + 1] as string);
  }
  return out;
}

export async function startTlsHop(options: TlsHopOptions): Promise<TlsHop> {
  const target = new URL(options.target);
  const forwarded: ForwardedByHop[] = [];
  const server = https.createServer({ cert: options.certificate.cert, key: options.certificate.key }, (req, res) => {
    const headers = forwardHeaders(req);
    forwarded.push({ method: req.method ?? 'GET', url: req.url ?? '/', headers: { ...req.headers, ...headers } as http.IncomingHttpHeaders });
    const upstream = http.request({
      host: target.hostname,
      port: Number(target.port),
      method: req.method,
      path: req.url,
      headers,
      ...(options.localAddress ? { localAddress: options.localAddress } : {}),
    });
    upstream.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, responseHeaders(answer.rawHeaders));
      answer.pipe(res);
    });
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end('bad gateway (tls hop)');
    });
    req.pipe(upstream);
  });
  const port = await listenOnLoopback(server);
  return { url: `https://127.0.0.1:${port}`, port, forwarded, close: () => closeServer(server) };
}
