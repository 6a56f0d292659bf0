/**
 * The one home of http-proxy-middleware: one proxy per route, over a keep-alive agent, with the
 * gateway's own header rules, deadline and error mapping. HPM's default plugins are ejected
 * (its logger does per-request work and its error page is not our error shape); the two that
 * keep a proxy safe are put back explicitly.
 */
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import {
  createProxyMiddleware,
  debugProxyErrorsPlugin,
  proxyEventsPlugin,
} from 'http-proxy-middleware';
import type { CompiledRoute } from './routes.js';
import { connectionNominated, filterSetCookie, forwardingHeaders, stripCookies } from './headers.js';
import { UpstreamTimeout } from './errors.js';

export interface UpstreamOptions {
  route: CompiledRoute;
  trustProxy: boolean;
  publicUrl: URL;
  /** True for cookie names the gateway owns (never forwarded, never overwritten by upstreams). */
  isGatewayCookie: (name: string) => boolean;
  /** Called when the upstream could not be reached or did not answer in time. */
  onError: (err: Error, req: http.IncomingMessage, res: http.ServerResponse | Socket) => void;
}

/** Credentials for one proxied request: the header to set, decided before forwarding. */
export interface Credential {
  header: string;
  value: string;
}

export interface Upstream {
  forward(req: http.IncomingMessage, res: http.ServerResponse, credential: Credential | undefined): Promise<void>;
  upgrade(req: http.IncomingMessage, socket: Socket, head: Buffer, credential: Credential | undefined): void;
  close(): void;
}

export function createUpstream(options: UpstreamOptions): Upstream {
  const { route, isGatewayCookie } = options;
  const target = new URL(route.target);
  const agent =
    target.protocol === 'https:'
      ? new https.Agent({ keepAlive: true, maxSockets: 512, scheduling: 'lifo' })
      : new http.Agent({ keepAlive: true, maxSockets: 512, scheduling: 'lifo' });
  const credentials = new WeakMap<http.IncomingMessage, Credential | undefined>();
  const timeoutMs = route.timeoutSeconds * 1000;

  function rewriteRequest(proxyReq: http.ClientRequest, req: http.IncomingMessage): void {
    for (const name of connectionNominated(req.headers)) proxyReq.removeHeader(name);
    proxyReq.removeHeader('authorization');
    const cookie = stripCookies(req.headers.cookie, isGatewayCookie);
    if (cookie === undefined) proxyReq.removeHeader('cookie');
    else proxyReq.setHeader('cookie', cookie);
    const forwarded = forwardingHeaders({
      headers: req.headers,
      remoteAddress: req.socket.remoteAddress,
      trustProxy: options.trustProxy,
      publicProtocol: options.publicUrl.protocol.slice(0, -1),
      publicHost: options.publicUrl.host,
    });
    for (const [name, value] of Object.entries(forwarded)) {
      if (value === undefined) proxyReq.removeHeader(name);
      else proxyReq.setHeader(name, value);
    }
    const credential = credentials.get(req);
    if (credential) proxyReq.setHeader(credential.header, credential.value);
  }

  const proxy = createProxyMiddleware<http.IncomingMessage, http.ServerResponse>({
    target: route.target,
    changeOrigin: true,
    xfwd: false,
    // Never let HPM subscribe to the server's upgrade event itself: it would proxy every upgrade
    // with no session or Origin check. The gateway's own upgrade handler calls upgrade().
    ws: false,
    agent,
    ejectPlugins: true,
    plugins: [debugProxyErrorsPlugin, proxyEventsPlugin],
    pathRewrite: (path) => {
      const q = path.indexOf('?');
      const pathname = q === -1 ? path : path.slice(0, q);
      return route.upstreamPath(pathname) + (q === -1 ? '' : path.slice(q));
    },
    on: {
      proxyReq(proxyReq, req) {
        rewriteRequest(proxyReq, req);
        // The deadline is for the response head only: a long download or an event stream
        // that has started answering is never cut by it.
        const timer = setTimeout(() => proxyReq.destroy(new UpstreamTimeout('no response in time')), timeoutMs);
        proxyReq.once('response', () => clearTimeout(timer));
        proxyReq.once('close', () => clearTimeout(timer));
      },
      proxyReqWs(proxyReq, req) {
        rewriteRequest(proxyReq, req);
      },
      proxyRes(proxyRes) {
        const kept = filterSetCookie(proxyRes.headers['set-cookie'], isGatewayCookie);
        if (kept !== undefined) proxyRes.headers['set-cookie'] = kept;
      },
      error(err, req, res) {
        options.onError(err, req, res);
      },
    },
  });

  return {
    forward(req, res, credential) {
      credentials.set(req, credential);
      return proxy(req, res);
    },
    upgrade(req, socket, head, credential) {
      credentials.set(req, credential);
      proxy.upgrade(req, socket, head);
    },
    close() {
      agent.destroy();
    },
  };
}
