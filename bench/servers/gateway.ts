/**
 * The gateway under test, built through its public programmatic API (src/index.ts: parseConfig,
 * createRuntime, startGateway) with a production-like config: log level info, default process
 * metrics on, one `auth: user` route to the echo upstream.
 *
 * Command `advanceClock` moves the gateway's clock forward (the refresh storm: every access
 * token looks expired without anyone waiting); profiling is in every child (lib/ipc.ts).
 */
import { randomBytes } from 'node:crypto';
import { createRuntime, parseConfig, startGateway } from '../../src/index.js';
import { childOptions, guardChild, serveChild } from '../lib/ipc.js';

export interface GatewayOptions {
  host: string;
  port: number;
  issuer: string;
  clientId: string;
  clientSecret: string;
  redisUrl: string;
  upstream: string;
}

guardChild(async () => {
  const opts = childOptions<GatewayOptions>();
  const publicUrl = `http://${opts.host}:${opts.port}`;
  const config = parseConfig(
    {
      server: { port: opts.port, host: opts.host, publicUrl },
      oidc: {
        issuer: opts.issuer,
        clientId: opts.clientId,
        clientSecret: opts.clientSecret,
        scopes: ['openid', 'profile', 'email', 'offline_access'],
      },
      session: {
        secrets: [randomBytes(32).toString('base64url')],
        encryptionKeys: [randomBytes(32).toString('base64')],
      },
      redis: { url: opts.redisUrl, keyPrefix: 'bench:' },
      routes: [{ path: '/api', target: opts.upstream, auth: 'user' }],
      log: { level: 'info' },
    },
    { env: {} },
  );
  let offsetMs = 0;
  const runtime = await createRuntime(config, { clock: () => Date.now() + offsetMs });
  await runtime.provider.ready();
  const gateway = await startGateway(config, runtime);

  serveChild(
    { url: publicUrl, cookieName: config.derived.sessionCookieName },
    {
      advanceClock(seconds: number) {
        offsetMs += seconds * 1000;
        return offsetMs;
      },
    },
    () => gateway.shutdown(),
  );
});
