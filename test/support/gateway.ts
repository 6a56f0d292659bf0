/**
 * An in-process gateway for integration tests, built exactly as main.ts builds it
 * (createRuntime + createApp), listening on 127.0.0.1 on a free port, with every log line
 * collected for assertions and leak scans.
 */
import http from 'node:http';
import { createApp, type AppOptions } from '../../src/app.js';
import type { Config } from '../../src/config/load.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { buildTestConfig, type TestConfigInput } from './config.js';
import { listenOnLoopback } from './listen.js';
import { createGatewayServer } from '../../src/http/server-options.js';

export interface ReservedServer {
  server: http.Server;
  port: number;
  url: string;
}

/** Listens first, so the public URL (and the redirect_uri to register) is known up front. */
export async function reserveServer(): Promise<ReservedServer> {
  const server = createGatewayServer();
  const port = await listenOnLoopback(server);
  return { server, port, url: `http://127.0.0.1:${port}` };
}

export interface TestGateway {
  url: string;
  config: Config;
  runtime: Runtime;
  app: http.RequestListener;
  server: http.Server;
  logs: string[];
  close(): Promise<void>;
}

export interface TestClock {
  now: () => number;
  /** Moves the gateway's clock forward (tokens expire without anyone waiting). */
  advance(seconds: number): void;
}

export function createTestClock(): TestClock {
  let offsetMs = 0;
  return {
    now: () => Date.now() + offsetMs,
    advance(seconds) {
      offsetMs += seconds * 1000;
    },
  };
}

export async function startTestGateway(
  config: Config,
  reserved?: ReservedServer,
  options: { clock?: TestClock; waitForProvider?: boolean; app?: AppOptions } = {},
): Promise<TestGateway> {
  const logs: string[] = [];
  const runtime = await createRuntime(config, {
    logDestination: { write: (line: string) => void logs.push(line) },
    defaultMetrics: false,
    ...(options.clock ? { clock: options.clock.now } : {}),
    discoveryRetry: { initialMs: 100, maxMs: 1000 },
  });
  if (options.waitForProvider ?? true) await runtime.provider.ready();
  const app = createApp(runtime, options.app);
  const target = reserved ?? (await reserveServer());
  target.server.on('request', app);
  target.server.on('upgrade', app.handleUpgrade);
  return {
    url: target.url,
    config,
    runtime,
    app,
    server: target.server,
    logs,
    async close() {
      target.server.closeAllConnections();
      await new Promise<void>((resolve) => target.server.close(() => resolve()));
      await runtime.close();
    },
  };
}

/** The client registration the test provider needs for a gateway at `publicUrl`. */
export function gatewayClient(publicUrl: string, overrides: Record<string, unknown> = {}) {
  return {
    client_id: 'bff-test',
    client_secret: 'bff-test-secret-0123456789abcdef',
    redirect_uris: [`${publicUrl}/auth/callback`],
    post_logout_redirect_uris: [`${publicUrl}/`],
    backchannel_logout_uri: `${publicUrl}/auth/backchannel-logout`,
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    ...overrides,
  };
}

export { buildTestConfig, type TestConfigInput };
