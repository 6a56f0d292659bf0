/**
 * The gateway under test, built through its public programmatic API (src/index.ts: parseConfig,
 * createRuntime, startGateway) with a production-like config: log level info, default process
 * metrics on, one `auth: user` route to the echo upstream.
 *
 * Commands: `advanceClock` moves the gateway's clock forward (the refresh storm: every access
 * token looks expired without anyone waiting), `profileStart` / `profileStop` record a CPU
 * profile of this process with the inspector's Profiler domain (in-process, so only the loaded
 * window is recorded, not startup and sign-in).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
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

  let profiler: Session | undefined;
  serveChild(
    { url: publicUrl, cookieName: config.derived.sessionCookieName },
    {
      advanceClock(seconds: number) {
        offsetMs += seconds * 1000;
        return offsetMs;
      },
      async profileStart(args: { samplingIntervalUs: number }) {
        profiler = new Session();
        profiler.connect();
        await profiler.post('Profiler.enable');
        await profiler.post('Profiler.setSamplingInterval', { interval: args.samplingIntervalUs });
        await profiler.post('Profiler.start');
        return true;
      },
      async profileStop(args: { file: string }) {
        if (!profiler) throw new Error('profiler not started');
        const { profile } = await profiler.post('Profiler.stop');
        profiler.disconnect();
        profiler = undefined;
        writeFileSync(args.file, JSON.stringify(profile));
        return args.file;
      },
    },
    () => gateway.shutdown(),
  );
});
