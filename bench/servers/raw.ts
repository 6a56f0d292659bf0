/**
 * The Node ceiling (issue 17): a raw `node:http` proxy, no framework, no auth, no header rules:
 * the request is streamed to the upstream over a keep-alive agent and the answer streamed back.
 * What no proxy on Node can beat; the gateway's distance from it is the cost of everything the
 * gateway does (session, credential, header rules, http-proxy-middleware).
 */
import http from 'node:http';
import { childOptions, guardChild } from '../lib/ipc.js';
import { listenChild, rawProxy } from '../lib/http-child.js';

guardChild(async () => {
  const { host, upstream } = childOptions<{ host: string; upstream: string }>();
  // The same pool shape as the gateway's upstream agent.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512, scheduling: 'lifo' });
  await listenChild(http.createServer(rawProxy(new URL(upstream), agent)), host, {}, () => agent.destroy());
});
