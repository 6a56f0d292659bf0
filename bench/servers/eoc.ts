/**
 * The second reference: what a team would write with express-openid-connect instead of this
 * gateway. Authorization code flow (PKCE) against the same provider, sessions in the same
 * Redis through connect-redis v8 on ioredis (EOC's defaults otherwise: rolling sessions), the
 * same CSRF header check, and the session's access token attached as Bearer by
 * http-proxy-middleware on the same path to the same upstream.
 */
import http from 'node:http';
import express from 'express';
import { auth, type ConfigParams } from 'express-openid-connect';
import { RedisStore } from 'connect-redis';
import { Redis } from 'ioredis';
import { createProxyMiddleware } from 'http-proxy-middleware';
import { childOptions, guardChild, serveChild } from '../lib/ipc.js';

export interface EocOptions {
  host: string;
  port: number;
  issuer: string;
  clientId: string;
  clientSecret: string;
  secret: string;
  redisUrl: string;
  upstream: string;
}

const json = (res: http.ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
};

guardChild(async () => {
  const opts = childOptions<EocOptions>();
  const baseURL = `http://${opts.host}:${opts.port}`;
  const redis = new Redis(opts.redisUrl, { maxRetriesPerRequest: 1 });
  const store = new RedisStore({ client: redis, prefix: 'eoc:' });

  const app = express();
  app.disable('x-powered-by');
  app.use(
    auth({
      issuerBaseURL: opts.issuer,
      baseURL,
      clientID: opts.clientId,
      clientSecret: opts.clientSecret,
      secret: opts.secret,
      authRequired: false,
      idpLogout: false,
      enableTelemetry: false,
      authorizationParams: { response_type: 'code', scope: 'openid profile email offline_access' },
      session: { store: store as unknown as NonNullable<NonNullable<ConfigParams['session']>['store']> },
    }),
  );
  app.use('/api', (req, res, next) => {
    if (req.headers['x-csrf'] !== '1') return json(res, 403, { error: 'csrf_check_failed' });
    if (!req.oidc.isAuthenticated() || !req.oidc.accessToken) return json(res, 401, { error: 'login_required' });
    next();
  });
  app.use(
    createProxyMiddleware({
      target: opts.upstream,
      changeOrigin: true,
      pathFilter: '/api',
      on: {
        proxyReq(proxyReq, req) {
          const token = (req as express.Request).oidc.accessToken?.access_token;
          proxyReq.setHeader('authorization', `Bearer ${token}`);
        },
      },
    }),
  );
  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, resolve);
  });
  serveChild({ url: baseURL }, {}, async () => {
    server.closeAllConnections();
    server.close();
    redis.disconnect();
  });
});
