/**
 * The upstream API every target proxies to: a minimal node:http server answering a small JSON
 * body over keep-alive. With `x-bench-echo-auth: 1` (refresh storm only) it also answers a short
 * digest of the Authorization header it received, so the bench can check that every call went
 * on with the same, new token without the token itself leaving the upstream, and the scheme
 * word of that header and whether a `DPoP` proof header came (the DPoP route's check). With
 * `x-bench-chunked: 1` the same body goes out chunked, without Content-Length, as a streaming
 * or compressing framework sends it (`npm run bench:instructions -- --chunked`).
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import { childOptions, guardChild } from '../lib/ipc.js';
import { listenChild } from '../lib/http-child.js';

const BODY = Buffer.from(JSON.stringify({ ok: true, service: 'bench-upstream', items: [1, 2, 3] }));

guardChild(async () => {
  const { host } = childOptions<{ host: string }>();
  let requests = 0;
  const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    requests += 1;
    const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json', 'content-length': BODY.length };
    if (req.headers['x-bench-echo-auth'] === '1') {
      const auth = req.headers.authorization ?? '';
      headers['x-bearer-digest'] = auth ? createHash('sha256').update(auth).digest('hex').slice(0, 16) : 'none';
      headers['x-bench-auth-scheme'] = /^(Bearer|DPoP) /.exec(auth)?.[1] ?? 'none';
      headers['x-bench-dpop-proof'] = req.headers.dpop ? 'yes' : 'no';
    }
    // Drain any request body before answering, so keep-alive stays usable.
    req.resume();
    if (req.headers['x-bench-chunked'] === '1') {
      delete headers['content-length'];
      res.writeHead(200, headers);
      res.write(BODY);
      res.end();
      return;
    }
    res.writeHead(200, headers);
    res.end(BODY);
  });
  await listenChild(server, host, { requests: () => requests });
});
