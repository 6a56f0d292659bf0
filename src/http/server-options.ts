/**
 * The gateway's HTTP server, as main.ts starts it and the tests do too (test/support/gateway.ts):
 * one set of options, so that what is tested is what runs.
 */
import http, { type IncomingMessage, type RequestListener, type ServerOptions } from 'node:http';

export const gatewayServerOptions: ServerOptions = {
  // Bodies stream to upstreams for as long as they take: the gateway's own endpoints bound
  // theirs (body-deadline.ts), proxied routes by their timeoutSeconds.
  requestTimeout: 0,
  headersTimeout: 30_000,
  maxHeaderSize: 16 * 1024,
  // Longer than the load balancers in front usually keep an idle connection (AWS ALB: 60 s), so
  // that they, not the gateway, close it: no request lost to a close racing it.
  keepAliveTimeout: 65_000,
  // Only a WebSocket handshake is an upgrade. Node hands every `Connection: Upgrade` request to
  // the upgrade listener otherwise: curl --http2 and some JVM clients ask for `h2c` on plain
  // http, and their calls were refused (404 on any path not a WebSocket route). RFC 9110 §7.8: a
  // server may ignore Upgrade, and these are served as the HTTP/1.1 requests they also are.
  // (Node 24.9 and later; an older Node ignores the option, and such requests still reach the
  // upgrade listener: http/websocket.ts.)
  shouldUpgradeCallback: (req: IncomingMessage) => asksForWebSocket(req),
};

/**
 * The gateway's server, with no limit of Node's on the number of header fields (the 16 KiB
 * maxHeaderSize bounds the head; http/header-fields.ts refuses past 100). Node before 22.23.2
 * and 24.18.1 (which `engines` admits) left every field past maxHeadersCount (2,000 names and
 * values) out of req.headers while its parser still framed the body by them: a Content-Length
 * past a thousand fields reached the gateway as a GET without a body, the body bytes were piped
 * on, and the upstream read them as a request of the browser's making, on a pooled connection,
 * past every route and check (request smuggling). With no limit, every Node hands over every
 * field it framed by.
 */
export function createGatewayServer(app?: RequestListener): http.Server {
  const server = app ? http.createServer(gatewayServerOptions, app) : http.createServer(gatewayServerOptions);
  server.maxHeadersCount = 0;
  return server;
}

/**
 * Whether Node's parser (llhttp) takes the request for an upgrade and stops reading the
 * connection after it: an Upgrade header and a Connection naming `upgrade`. With Upgrade alone
 * it reads on, and serves what is pipelined behind it.
 */
export const asksUpgrade = (req: IncomingMessage): boolean =>
  req.headers.upgrade !== undefined && /(?:^|,)[ \t]*upgrade[ \t]*(?:,|$)/i.test(req.headers.connection ?? '');

/** `Upgrade: websocket`, in any case: the one upgrade the gateway serves. */
export const asksForWebSocket = (req: IncomingMessage): boolean => req.headers.upgrade?.toLowerCase() === 'websocket';
