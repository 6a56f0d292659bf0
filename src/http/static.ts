import path from 'node:path';
import express, { type RequestHandler } from 'express';

/**
 * The SPA from the gateway's origin. With `spaFallback`, a GET for an unknown path without a
 * file extension answers index.html so client-side routes survive a reload.
 */
export function createStatic(root: string, spaFallback: boolean): RequestHandler[] {
  const serve = express.static(root, { index: 'index.html', fallthrough: true, dotfiles: 'ignore' });
  const handlers: RequestHandler[] = [serve];
  if (spaFallback) {
    handlers.push((req, res, next) => {
      if ((req.method !== 'GET' && req.method !== 'HEAD') || path.extname(req.path) !== '' || !req.accepts('html')) return next();
      res.set('Cache-Control', 'no-cache');
      res.sendFile(path.join(root, 'index.html'), (err) => (err ? next() : undefined));
    });
  }
  return handlers;
}
