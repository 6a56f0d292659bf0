/**
 * The shipped p99 latency alert (deploy/prometheus/alerts.yml, BffHighLatencyP99) against what a
 * real gateway exports when its SPA uses `GET /auth/events`, as the demo SPA does and README
 * recommends: that stream is metered under route `/auth/events` in
 * `bff_http_request_duration_seconds` with its whole length (README, Metrics), so every tab a
 * user closes after a second or more is a "slow request" of that route. In any deployment where
 * users come and go, the alert's expression holds all the time and the alert fires for good:
 * a page nobody can act on, which hides a real latency problem of the proxied routes.
 *
 * A real Prometheus scrapes a gateway (main.ts's metrics port); two event streams stay open
 * over three scrapes (so each lived longer than the alert's 1 s bound), then close one after
 * the other (the first creates the series, the second moves it, as any later stream does); the
 * alert's own expression, read from the rules file, must give no series for `/auth/events`.
 *
 * Mutation check: with the exclusion removed from the rule's expression (and the dashboard's),
 * the test fails listing route "/auth/events".
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { startGateway, type RunningGateway } from '../../../src/main.js';
import { createRuntime } from '../../../src/runtime.js';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, gatewayClient } from '../../support/gateway.js';
import { openStream, type HeldStream } from '../../support/live-streams.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { findFreePort } from '../../support/redis-server.js';
import { eventually } from '../../support/wait.js';

const PROMETHEUS = '/usr/bin/prometheus';
const RULES = path.resolve('deploy/prometheus/alerts.yml');
const DASHBOARD = path.resolve('deploy/grafana/bff-gateway.json');

const havePrometheus = existsSync(PROMETHEUS);
if (!havePrometheus && process.env.CI) throw new Error(`${PROMETHEUS} is missing under CI: .ci/run installs Debian's prometheus`);
if (!havePrometheus) process.stderr.write(`\n!!! ${PROMETHEUS} is missing: test/integration/ops/latency-alert-event-streams.test.ts is SKIPPED.\n`);
const run = havePrometheus ? describe : describe.skip;

function alertExpr(name: string): string {
  const rules = YAML.parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Array<{ alert?: string; expr: string }> }> };
  const rule = rules.groups.flatMap((g) => g.rules).find((r) => r.alert === name);
  if (!rule) throw new Error(`no alert ${name} in ${RULES}`);
  return rule.expr;
}

type Sample = { metric: Record<string, string>; value: [number, string] };

run('the p99 latency alert and the gateway\'s own event stream', () => {
  let tmp: string;
  let provider: TestProvider;
  let gateway: RunningGateway;
  let prometheus: ChildProcess | undefined;
  let prometheusUrl: string;
  let prometheusLog = '';
  let publicUrl: string;
  let cookieNameOf: string;
  const streams: HeldStream[] = [];

  async function query(expr: string): Promise<Sample[]> {
    const res = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(expr)}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await res.json()) as { status: string; data: { result: Sample[] } };
    if (body.status !== 'success') throw new Error(`Prometheus refused ${expr}`);
    return body.data.result;
  }
  const scalar = async (expr: string) => {
    const [first] = await query(expr);
    return first ? { at: first.value[0], value: Number(first.value[1]) } : undefined;
  };

  beforeAll(async () => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-latency-alert-'));
    const port = await findFreePort();
    publicUrl = `http://127.0.0.1:${port}`;
    provider = await startTestProvider({ clients: [gatewayClient(publicUrl)] });
    const config = buildTestConfig({ issuer: provider.issuer, publicUrl, server: { port, metricsPort: 0 } });
    cookieNameOf = config.derived.sessionCookieName;
    const runtime = await createRuntime(config, { defaultMetrics: false, logDestination: { write: () => undefined } });
    await runtime.provider.ready();
    gateway = await startGateway(config, runtime);

    const promPort = await findFreePort();
    prometheusUrl = `http://127.0.0.1:${promPort}`;
    const configFile = path.join(tmp, 'prometheus.yml');
    writeFileSync(
      configFile,
      `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: bff\n    static_configs:\n      - targets: ['${new URL(gateway.metricsUrl as string).host}']\n`,
    );
    prometheus = spawn(
      PROMETHEUS,
      [`--config.file=${configFile}`, `--storage.tsdb.path=${path.join(tmp, 'data')}`, `--web.listen-address=127.0.0.1:${promPort}`, '--log.level=warn'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    prometheus.stderr?.on('data', (c: Buffer) => (prometheusLog += c.toString('utf8')));
    await eventually(`Prometheus scrapes the gateway`, 30_000, async () => ((await scalar('up{job="bff"}'))?.value ?? 0) === 1, { ignoreErrors: true, intervalMs: 250 });
  }, 90_000);

  afterAll(async () => {
    for (const s of streams) s.destroy();
    prometheus?.kill('SIGKILL');
    await gateway?.shutdown();
    await provider?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('does not page for event streams that users simply kept open (tabs left open, then closed)', async () => {
    const client = new BrowserClient();
    await signIn(client, gateway.url);
    const cookieName = cookieNameOf;
    const cookie = `${cookieName}=${client.cookies(gateway.url)[cookieName] as string}`;
    const headers = { cookie, accept: 'text/event-stream', origin: publicUrl };
    for (let i = 0; i < 2; i++) {
      const stream = await openStream(`${gateway.url}/auth/events`, headers);
      expect(stream.status).toBe(200);
      streams.push(stream);
    }
    // Both open over three scrapes a second apart: each stream has lived for more than 1 s.
    const firstSeen = await eventually('Prometheus sees both streams open', 30_000, async () => {
      const open = await scalar('bff_event_streams_open{job="bff"}');
      return open?.value === 2 ? open.at : undefined;
    }, { intervalMs: 250 });
    await eventually('three scrapes of both streams open', 30_000, async () => {
      const open = await scalar('bff_event_streams_open{job="bff"}');
      return open !== undefined && open.value === 2 && open.at >= firstSeen + 2;
    }, { intervalMs: 250 });

    // The first close creates the series; the second moves it, as every later one does.
    const count = 'bff_http_request_duration_seconds_count{job="bff",route="/auth/events"}';
    (streams[0] as HeldStream).destroy();
    await eventually('Prometheus sees the first stream metered', 30_000, async () => (await scalar(count))?.value === 1, { intervalMs: 250 });
    (streams[1] as HeldStream).destroy();
    await eventually('Prometheus sees the second stream metered', 30_000, async () => (await scalar(count))?.value === 2, { intervalMs: 250 });

    const firing = await query(alertExpr('BffHighLatencyP99'));
    expect(firing.map((s) => s.metric.route)).not.toContain('/auth/events');

    // The dashboard's latency panels (p50/p95/p99 by route) read the same way.
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Array<{ title: string; targets: Array<{ expr: string }> }> };
    const panels = dashboard.panels.flatMap((p) => p.targets.map((t) => ({ title: p.title, expr: t.expr })));
    const latency = panels.filter((p) => p.expr.includes('bff_http_request_duration_seconds_bucket'));
    expect(latency.length).toBeGreaterThan(0);
    const shown: string[] = [];
    for (const { title, expr } of latency) {
      const result = await query(expr.replaceAll('$__rate_interval', '1m').replaceAll('$instance', '.*'));
      if (result.some((s) => s.metric.route === '/auth/events' && Number.isFinite(Number(s.value[1])))) shown.push(title);
    }
    expect(shown).toEqual([]);
  }, 120_000);
});
