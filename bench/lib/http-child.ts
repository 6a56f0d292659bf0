/**
 * What the bench's HTTP servers share: listening on a free port of `host` with the keep-alive
 * timeout the load generator expects, then serving the parent's commands (lib/ipc.ts), and the
 * raw node:http proxy handler (servers/raw.ts, and the floors of servers/floor.ts).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveChild, type Handler } from './ipc.js';

/** Listens on a free port, then serves `handlers`; shutdown closes the server, then runs `cleanup`. */
export async function listenChild(
  server: http.Server,
  host: string,
  handlers: Record<string, Handler> = {},
  cleanup?: () => void,
): Promise<void> {
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  serveChild({ url: `http://${host}:${port}` }, handlers, () => {
    server.closeAllConnections();
    server.close();
    cleanup?.();
  });
}

/**
 * No framework, no auth, no header rules: the request streamed to `target` over `agent` and the
 * answer streamed back. What no proxy on Node can beat.
 */
export function rawProxy(target: URL, agent: http.Agent): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  return (req, res) => {
    const headers = { ...req.headers, host: target.host };
    const proxyReq = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent }, (proxyRes) => {
      res.writeHead(proxyRes.statusCode ?? 502, proxyRes.rawHeaders);
      proxyRes.pipe(res);
    });
    proxyReq.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(proxyReq);
  };
}
