/**
 * The floors under the gateway (issue 17, `npm run bench:instructions -- --floors`): what the
 * constraints alone cost, with nothing of the gateway's own in the way.
 *
 *   engine 'raw': the raw node:http proxy of servers/raw.ts (the Node ceiling)
 *   engine 'hpm': http-proxy-middleware called straight from node:http, no Express, no auth:
 *                 the proxy engine the gateway must keep, as its README mounts it
 *   engine 'httpxy': the proxy server http-proxy-middleware builds (httpxy), called per request
 *                 with a fixed options object, as the gateway calls it (src/proxy/upstream.ts):
 *                 HPM's per-call middleware skipped
 *   redisUrl set: one GETEX per call through ioredis before forwarding (the key named by the
 *                 request's cookie header), the one Redis command per call the gateway keeps,
 *                 with the gateway's write coalescing (src/redis/client.ts): one socket write
 *                 per event-loop turn
 *
 * The gateway can be no cheaper than 'hpm' with a GETEX; how far 'hpm' alone sits below 'raw'
 * is what keeping the engine costs before the gateway does anything.
 */
import http from 'node:http';
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { createProxyMiddleware } from 'http-proxy-middleware';
import { createWriteCoalescer } from '../../src/redis/client.js';
import { childOptions, guardChild } from '../lib/ipc.js';
import { listenChild, rawProxy } from '../lib/http-child.js';

export interface FloorOptions {
  host: string;
  upstream: string;
  engine: 'raw' | 'hpm' | 'httpxy';
  redisUrl?: string;
  /** Size of the value each GETEX reads (the gateway's session record, measured by the bench). */
  valueBytes?: number;
}

guardChild(async () => {
  const { host, upstream, engine, redisUrl, valueBytes = 1500 } = childOptions<FloorOptions>();
  const target = new URL(upstream);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512, scheduling: 'lifo' });

  const raw = rawProxy(target, agent);
  type ProxyServer = { web(req: http.IncomingMessage, res: http.ServerResponse, opts: object): Promise<void> };
  let proxyServer: ProxyServer | undefined;
  const hpm = createProxyMiddleware<http.IncomingMessage, http.ServerResponse>({
    target: upstream,
    changeOrigin: true,
    agent,
    ...(engine === 'httpxy' ? { plugins: [(server: unknown) => void (proxyServer = server as ProxyServer)] } : {}),
  });
  const callOptions = { target, changeOrigin: true, agent };
  const fail = (res: http.ServerResponse) => {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  };
  const forward =
    engine === 'raw'
      ? raw
      : engine === 'httpxy'
        ? (req: http.IncomingMessage, res: http.ServerResponse) => {
            (proxyServer as ProxyServer).web(req, res, callOptions).catch(() => fail(res));
          }
        : (req: http.IncomingMessage, res: http.ServerResponse) => {
            hpm(req, res, () => fail(res)).catch(() => fail(res));
          };

  const redis = redisUrl ? new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 }) : undefined;
  await redis?.connect();
  // One key per distinct cookie header, written once with a record-sized value: every later
  // call is the steady state, one GETEX that returns that value.
  const keyOf = new Map<string, string>();
  const seed = 'x'.repeat(valueBytes);
  const seedAndRead = async (r: Redis, cookie: string) => {
    const k = `floor:${createHash('sha256').update(cookie).digest('base64url')}`;
    await r.set(k, seed, 'EX', 3600);
    keyOf.set(cookie, k);
    return r.getexBuffer(k, 'EX', 3600);
  };
  const holdWrites = redis ? createWriteCoalescer(redis) : () => undefined;
  const read = (r: Redis, cookie: string) => {
    holdWrites();
    const k = keyOf.get(cookie);
    return k === undefined ? seedAndRead(r, cookie) : r.getexBuffer(k, 'EX', 3600);
  };
  const server = http.createServer(
    redis
      ? (req, res) => {
          read(redis, req.headers.cookie ?? '').then(
            () => forward(req, res),
            () => fail(res),
          );
        }
      : forward,
  );
  await listenChild(server, host, {}, () => {
    agent.destroy();
    redis?.disconnect();
  });
});
