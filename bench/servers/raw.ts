/**
 * The Node ceiling (issue 17): a raw `node:http` proxy, no framework, no auth, no header rules:
 * the request is streamed to the upstream over a keep-alive agent and the answer streamed back.
 * What no proxy on Node can beat; the gateway's distance from it is the cost of everything the
 * gateway does (session, credential, header rules, http-proxy-middleware).
 */
import http from 'node:http';
import { childOptions, guardChild, serveChild } from '../lib/ipc.js';

guardChild(async () => {
  const { host, upstream } = childOptions<{ host: string; upstream: string }>();
  const target = new URL(upstream);
  // The same pool shape as the gateway's upstream agent.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512, scheduling: 'lifo' });
  const server = http.createServer((req, res) => {
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
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as { port: number };
  serveChild({ url: `http://${host}:${port}` }, {}, () => {
    server.closeAllConnections();
    server.close();
    agent.destroy();
  });
});
