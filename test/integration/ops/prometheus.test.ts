/**
 * The shipped alerts and dashboard against real Prometheus (Debian's `prometheus` package,
 * SPEC §7a, issue 17): `promtool` checks and unit-tests the rules, then a Prometheus scrapes a
 * gateway started as main.ts starts it (metrics port, default process metrics), after traffic
 * that makes every series exist, and its query API must return a series for every metric name
 * the alerts and the dashboard use, and accept every one of their expressions.
 *
 * Mutation check: rename a metric in src/observability/metrics.ts (e.g. `bff_dependency_up` →
 * `bff_dependencies_up`): the series test fails naming it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { startGateway, type RunningGateway } from '../../../src/main.js';
import { createRuntime } from '../../../src/runtime.js';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { buildTestConfig, createTestClock, gatewayClient } from '../../support/gateway.js';
import { startTestProvider, type TestProvider } from '../../support/oidc-provider.js';
import { findFreePort } from '../../support/redis-server.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const PROMETHEUS = '/usr/bin/prometheus';
const PROMTOOL = '/usr/bin/promtool';
const RULES = path.resolve('deploy/prometheus/alerts.yml');
const RULE_TESTS = path.resolve('deploy/prometheus/alerts.test.yml');
const DASHBOARD = path.resolve('deploy/grafana/bff-gateway.json');
const csrf = { 'x-csrf': '1' };

const havePrometheus = existsSync(PROMETHEUS) && existsSync(PROMTOOL);
if (!havePrometheus && process.env.CI) throw new Error(`${PROMETHEUS} is missing under CI: .ci/run installs Debian's prometheus`);
if (!havePrometheus) {
  const banner = `\n${'!'.repeat(100)}\n!!! ${PROMETHEUS} is missing: the Prometheus tests (test/integration/ops/prometheus.test.ts) are SKIPPED.\n!!! apt-get install prometheus (.ci/run does it) to run them.\n${'!'.repeat(100)}\n`;
  process.stderr.write(banner);
}
const run = havePrometheus ? describe : describe.skip;

/** Every bff_* metric name an expression mentions. */
function metricNames(text: string): string[] {
  return [...new Set(text.match(/\bbff_[a-z0-9_]+/g) ?? [])];
}

/** The PromQL expressions of the dashboard, with Grafana's variables given plain values. */
function dashboardExprs(): string[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Array<{ targets: Array<{ expr: string }> }> };
  return dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr.replaceAll('$__rate_interval', '1m').replaceAll('$instance', '.*')));
}

/** The `expr`s of the alerting rules (YAML read as text: one `expr:` per rule, possibly a block). */
function alertExprs(): string[] {
  const text = readFileSync(RULES, 'utf8');
  const exprs: string[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^(\s*)expr:\s*(.*)$/.exec(lines[i] as string);
    if (!m) continue;
    if ((m[2] as string).trim() !== '|') {
      exprs.push((m[2] as string).trim());
      continue;
    }
    const indent = (m[1] as string).length;
    const block: string[] = [];
    while (i + 1 < lines.length && ((lines[i + 1] as string).trim() === '' || /^\s*/.exec(lines[i + 1] as string)![0].length > indent)) block.push((lines[++i] as string).trim());
    exprs.push(block.join(' '));
  }
  return exprs;
}

run('Prometheus rules and dashboard', () => {
  let tmp: string;
  let provider: TestProvider;
  let upstream: Upstream;
  let gateway: RunningGateway;
  let prometheus: ChildProcess | undefined;
  let prometheusUrl: string;
  const clock = createTestClock();

  async function query(expr: string): Promise<{ status: string; data: { result: unknown[] } }> {
    const res = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(expr)}`, { signal: AbortSignal.timeout(10_000) });
    return (await res.json()) as { status: string; data: { result: unknown[] } };
  }

  beforeAll(async () => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'bff-prometheus-'));
    upstream = await startUpstream({ websocket: true });
    const port = await findFreePort();
    const publicUrl = `http://127.0.0.1:${port}`;
    provider = await startTestProvider({ clients: [gatewayClient(publicUrl, { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'] })] });
    const config = buildTestConfig({
      issuer: provider.issuer,
      publicUrl,
      server: { port, metricsPort: 0 },
      routes: [
        { path: '/api', target: upstream.url, auth: 'user' },
        { path: '/live', target: upstream.url, auth: 'user', websocket: true },
        { path: '/service', target: upstream.url, auth: 'client' },
        { path: '/dead', target: 'http://127.0.0.1:1', auth: 'none' },
      ],
    });
    const runtime = await createRuntime(config, { clock: clock.now, defaultMetrics: true, logDestination: { write: () => undefined } });
    await runtime.provider.ready();
    gateway = await startGateway(config, runtime);

    // Traffic that makes every series exist: sign-in, calls, a refresh, a client token, an
    // upstream error, a failed callback, a WebSocket opened and closed.
    const client = new BrowserClient();
    await signIn(client, gateway.url);
    expect((await client.get(`${gateway.url}/api/echo`, { headers: csrf })).status).toBe(200);
    clock.advance(3600);
    expect((await client.get(`${gateway.url}/api/echo`, { headers: csrf })).status).toBe(200);
    expect((await client.get(`${gateway.url}/service/echo`, { headers: csrf })).status).toBe(200);
    expect((await client.get(`${gateway.url}/dead/x`, { headers: csrf })).status).toBe(502);
    expect((await new BrowserClient().get(`${gateway.url}/auth/callback?state=nope&code=x`)).status).toBe(400);
    const cookie = client.cookies(gateway.url)[config.derived.sessionCookieName] as string;
    const socket = new WebSocket(`ws://127.0.0.1:${port}/live/ws`, { headers: { origin: publicUrl, cookie: `${config.derived.sessionCookieName}=${cookie}` } });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    socket.close();

    const promPort = await findFreePort();
    prometheusUrl = `http://127.0.0.1:${promPort}`;
    const configFile = path.join(tmp, 'prometheus.yml');
    writeFileSync(
      configFile,
      `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - ${RULES}\nscrape_configs:\n  - job_name: bff\n    static_configs:\n      - targets: ['${new URL(gateway.metricsUrl as string).host}']\n`,
    );
    prometheus = spawn(
      PROMETHEUS,
      [`--config.file=${configFile}`, `--storage.tsdb.path=${path.join(tmp, 'data')}`, `--web.listen-address=127.0.0.1:${promPort}`, '--log.level=warn'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    prometheus.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    // Ready once it has scraped the gateway at least twice (rates need two samples).
    const deadline = performance.now() + 30_000;
    for (;;) {
      const up = await query('count_over_time(up{job="bff"}[1m])').catch(() => undefined);
      const samples = Number((up?.data.result[0] as { value?: [number, string] } | undefined)?.value?.[1] ?? 0);
      if (samples >= 2) break;
      if (performance.now() > deadline) throw new Error(`Prometheus did not scrape the gateway within 30 s:\n${stderr}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }, 90_000);

  afterAll(async () => {
    prometheus?.kill('SIGKILL');
    await gateway?.shutdown();
    await provider?.close();
    await upstream?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('promtool accepts the rules and every alert fires in its unit tests', () => {
    const check = spawnSync(PROMTOOL, ['check', 'rules', RULES], { encoding: 'utf8', timeout: 30_000 });
    expect(check.status).toBe(0);
    expect(check.stdout).toMatch(/SUCCESS: \d+ rules found/);
    const unit = spawnSync(PROMTOOL, ['test', 'rules', RULE_TESTS], { encoding: 'utf8', timeout: 30_000 });
    expect(`${unit.stdout}${unit.stderr}`).toMatch(/SUCCESS/);
    expect(unit.status).toBe(0);
  });

  it('finds a series for every metric the alerts and the dashboard use, scraped from the gateway', async () => {
    const names = metricNames(`${readFileSync(RULES, 'utf8')}\n${readFileSync(DASHBOARD, 'utf8')}`);
    expect(names.length).toBeGreaterThanOrEqual(12);
    const missing: string[] = [];
    for (const name of names) {
      const res = await fetch(`${prometheusUrl}/api/v1/series?match[]=${encodeURIComponent(`{__name__="${name}",job="bff"}`)}`);
      const body = (await res.json()) as { data: unknown[] };
      if (body.data.length === 0) missing.push(name);
    }
    expect(missing).toEqual([]);
  });

  it('accepts every expression of the alerts and the dashboard, and a healthy gateway fires no alert', async () => {
    const exprs = [...alertExprs(), ...dashboardExprs()];
    expect(exprs.length).toBeGreaterThanOrEqual(20);
    for (const expr of exprs) {
      const result = await query(expr);
      if (result.status !== 'success') throw new Error(`Prometheus refused: ${expr}`);
    }
    expect((await query('bff_dependency_up{dependency="redis"}')).data.result).toEqual([expect.objectContaining({ value: [expect.any(Number), '1'] })]);
    expect((await query('ALERTS{alertstate="firing"}')).data.result).toEqual([]);
  });
});
