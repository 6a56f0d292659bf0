/**
 * The baseline: a bare Express + http-proxy-middleware proxy with no auth, as its README
 * writes it (HPM's defaults, including its keep-alive agent), on the same path to the same
 * upstream.
 */
import http from 'node:http';
import express from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import { childOptions, guardChild, serveChild } from '../lib/ipc.js';

guardChild(async () => {
  const { host, upstream } = childOptions<{ host: string; upstream: string }>();
  const app = express();
  app.use(createProxyMiddleware({ target: upstream, changeOrigin: true, pathFilter: '/api' }));
  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as { port: number };
  serveChild({ url: `http://${host}:${port}` }, {}, () => {
    server.closeAllConnections();
    server.close();
  });
});
