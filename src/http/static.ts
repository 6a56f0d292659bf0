import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import express, { type RequestHandler } from 'express';

/**
 * The SPA from the gateway's origin. With `spaFallback`, a GET for an unknown path without a
 * file extension answers index.html so client-side routes survive a reload.
 *
 * Only files whose real path lies inside the root's real path are served: express.static
 * follows symlinks, so a link in the root (to a file, or to a directory) would publish
 * whatever it points at. A file reached through such a link is answered as a missing one.
 */
export function createStatic(root: string, spaFallback: boolean): RequestHandler[] {
  const serve = express.static(root, { index: 'index.html', fallthrough: true, dotfiles: 'ignore' });
  const within = insideRoot(root);
  // Express 5 passes a rejected promise on to the error handler.
  const handlers: RequestHandler[] = [
    async (req, res, next) => {
      if (req.method !== 'GET' && req.method !== 'HEAD') return next();
      const file = await servedFile(root, req.path);
      if (file !== undefined && !(await within(file))) return next();
      return serve(req, res, next);
    },
  ];
  if (spaFallback) {
    const index = path.join(root, 'index.html');
    handlers.push(async (req, res, next) => {
      if ((req.method !== 'GET' && req.method !== 'HEAD') || path.extname(req.path) !== '' || !req.accepts('html')) return next();
      if (!(await within(index))) return next();
      res.set('Cache-Control', 'no-cache');
      res.sendFile(index, (err) => (err ? next() : undefined));
    });
  }
  return handlers;
}

/**
 * The file express.static would send for this request path (a directory's index.html), or
 * undefined when there is none or the path is one it refuses itself (bad escape, NUL, `..`).
 */
async function servedFile(root: string, requestPath: string): Promise<string | undefined> {
  let decoded: string;
  try {
    decoded = decodeURIComponent(requestPath);
  } catch {
    return undefined;
  }
  if (decoded.includes('\0')) return undefined;
  const file = path.join(root, decoded);
  const info = await stat(file).catch(() => undefined);
  if (info === undefined) return undefined;
  return info.isDirectory() ? path.join(file, 'index.html') : file;
}

/**
 * Is this file's real path inside the root's real path? (A missing file is: nothing to leak.)
 * The root's real path is kept, and resolved again before a file is refused: a root that is
 * itself a link (a release directory re-pointed by a deploy) moves without a restart.
 */
function insideRoot(root: string): (file: string) => Promise<boolean> {
  let realRoot: string | undefined;
  const under = (real: string, base: string) => real === base || real.startsWith(base.endsWith(path.sep) ? base : base + path.sep);
  return async (file) => {
    const real = await realpath(file).catch(() => undefined);
    if (real === undefined) return true;
    if (realRoot !== undefined && under(real, realRoot)) return true;
    realRoot = await realpath(root).catch(() => undefined);
    return realRoot === undefined || under(real, realRoot);
  };
}
