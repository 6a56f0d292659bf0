/**
 * The baseline: a bare Express + http-proxy-middleware proxy with no auth, as its README
 * writes it (HPM's defaults, including its keep-alive agent), on the same path to the same
 * upstream.
 */
import http from 'node:http';
import express from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import { childOptions, guardChild } from '../lib/ipc.js';
import { listenChild } from '../lib/http-child.js';

guardChild(async () => {
  const { host, upstream } = childOptions<{ host: string; upstream: string }>();
  const app = express();
  app.use(createProxyMiddleware({ target: upstream, changeOrigin: true, pathFilter: '/api' }));
  await listenChild(http.createServer(app), host);
});
