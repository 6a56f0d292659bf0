/**
 * A route's keep-alive agent, whose upstream requests carry their call and their deadline from
 * the moment the agent is given them, before any connection. httpxy's proxyReq event comes only
 * once a connection is assigned: a call queued behind `maxConnections` busy ones (event
 * streams, slow downloads) had no deadline at all.
 *
 * A request still queued at its deadline is taken out of the agent's queue (`agent.requests`,
 * documented) and its call answered through `onQueuedTimeout`: Node would tell of it only once a
 * connection freed, as a "socket hang up", and meanwhile it held the call's request and response.
 */
import http from 'node:http';
import https from 'node:https';
import { createDeadlines } from './deadlines.js';
import { UpstreamTimeout } from './errors.js';

const CALL_REQ = Symbol('call-req');
const CALL_RES = Symbol('call-res');
/** An upstream request with the call it serves. */
type Queued = http.ClientRequest & { [CALL_REQ]?: http.IncomingMessage | undefined; [CALL_RES]?: http.ServerResponse | undefined };

/** What @types/node leaves out: how http.request hands a request to its agent, and the queues. */
type AgentInternals = {
  addRequest(req: http.ClientRequest, options: http.RequestOptions): void;
  requests: Record<string, http.ClientRequest[] | undefined>;
};

export interface RouteAgentOptions {
  secure: boolean;
  maxConnections: number;
  timeoutMs: number;
  /** A call whose request was still waiting for a connection at its deadline: answer it (504). */
  onQueuedTimeout(err: UpstreamTimeout, req: http.IncomingMessage, res: http.ServerResponse): void;
}

export interface RouteAgent {
  agent: http.Agent;
  /**
   * `send` as it must be called: it creates the call's upstream request synchronously (httpxy's
   * web() does), and that request is then known as this call's from the moment it is queued.
   */
  sending<O, T>(send: (req: http.IncomingMessage, res: http.ServerResponse, opts: O) => T): (req: http.IncomingMessage, res: http.ServerResponse, opts: O) => T;
  /** The request's response head has come: its deadline no longer applies. */
  answered(proxyReq: http.ClientRequest): void;
  /**
   * Closes every idle pooled connection: one reset on reuse says the upstream restarted
   * without closing them (a host rebooted, a NAT's table flushed), and the rest are as dead.
   */
  dropIdle(): void;
  close(): void;
}

export function createRouteAgent(options: RouteAgentOptions): RouteAgent {
  const agentOptions = { keepAlive: true, maxSockets: options.maxConnections, scheduling: 'lifo' as const };
  const agent = options.secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  const internals = agent as unknown as AgentInternals;

  const deadlines = createDeadlines<Queued>({
    timeoutMs: options.timeoutMs,
    expire(proxyReq) {
      const req = proxyReq[CALL_REQ];
      const res = proxyReq[CALL_RES];
      if (proxyReq.socket !== null || req === undefined || res === undefined || !unqueue(proxyReq)) {
        proxyReq.destroy(new UpstreamTimeout('no response in time'));
        return;
      }
      proxyReq.destroy();
      options.onQueuedTimeout(new UpstreamTimeout('no connection to the upstream in time'), req, res);
    },
    isSettled: (proxyReq) => proxyReq.destroyed,
  });

  /** Takes `proxyReq` out of whichever queue holds it (a rare path: a sweep, not a lookup per call). */
  function unqueue(proxyReq: http.ClientRequest): boolean {
    for (const queue of Object.values(internals.requests)) {
      const at = queue === undefined ? -1 : queue.indexOf(proxyReq);
      if (at === -1) continue;
      queue?.splice(at, 1);
      return true;
    }
    return false;
  }

  // The call whose upstream request the agent is about to be given.
  let callReq: http.IncomingMessage | undefined;
  let callRes: http.ServerResponse | undefined;
  const addRequest = internals.addRequest.bind(agent);
  internals.addRequest = (proxyReq: Queued, requestOptions) => {
    proxyReq[CALL_REQ] = callReq;
    proxyReq[CALL_RES] = callRes;
    deadlines.track(proxyReq);
    addRequest(proxyReq, requestOptions);
  };

  return {
    agent,
    sending: (send) => (req, res, opts) => {
      const outerReq = callReq;
      const outerRes = callRes;
      callReq = req;
      callRes = res;
      try {
        return send(req, res, opts);
      } finally {
        callReq = outerReq;
        callRes = outerRes;
      }
    },
    answered: (proxyReq) => deadlines.done(proxyReq),
    dropIdle() {
      for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
    },
    close() {
      deadlines.close();
      agent.destroy();
    },
  };
}
