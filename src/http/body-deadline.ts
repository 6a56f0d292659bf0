/**
 * A deadline for request bodies on the gateway's own endpoints (SPEC §7: a body that stops
 * arriving is cut off within seconds). Node's own `requestTimeout` is 300 s and applies to every
 * connection, proxied uploads included; this one applies only where Express serves the request,
 * and proxied routes never pass through it, so long uploads to upstreams are not cut.
 *
 * A request that promises a body (Content-Length > 0 or Transfer-Encoding, RFC 9112 §6.3) and
 * has not been received completely (`req.complete`) when the deadline passes gets 408
 * request_timeout if nothing was answered yet, and its connection is closed either way (RFC
 * 9110 §15.5.9: the server closes the connection it no longer wants to wait on). Whether the
 * handler read the body does not matter: Node marks the message complete when it has arrived.
 */
import type { RequestHandler, Request, Response } from 'express';
import { GatewayError } from '../errors.js';
import { sendError } from './error-handler.js';
import { announcesBody } from '../proxy/headers.js';

export interface BodyDeadlineOptions {
  seconds: number;
  /** Runs before the 408 is written: the gateway's security headers, like every answer of its own. */
  headers?: RequestHandler;
}

export function createBodyDeadline(options: BodyDeadlineOptions): RequestHandler {
  const ms = options.seconds * 1000;

  function expire(req: Request, res: Response): void {
    const socket = req.socket;
    if (req.complete || socket.destroyed) return;
    if (res.headersSent) {
      socket.destroy();
      return;
    }
    // Connection: close makes Node end the socket once the answer is written; a client that
    // does not read it either is cut after one more period.
    res.set('Connection', 'close');
    const send = () => sendError(res, new GatewayError('request_timeout'));
    if (options.headers) options.headers(req, res, send);
    else send();
    const hard = setTimeout(() => socket.destroy(), ms);
    hard.unref();
    socket.once('close', () => clearTimeout(hard));
  }

  return function bodyDeadline(req, res, next) {
    if (req.complete || !announcesBody(req.headers)) return next();
    const timer = setTimeout(() => expire(req, res), ms);
    timer.unref();
    const stop = () => clearTimeout(timer);
    // 'end': the whole body was read (by a parser, or drained by Node after the answer);
    // 'close': the request is over or its connection gone. Either way there is nothing to wait for.
    req.once('end', stop);
    req.once('close', stop);
    next();
  };
}
