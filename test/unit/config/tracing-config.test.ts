/**
 * observability.tracing (SPEC §2): off by default, the OTLP endpoint from the file or from the
 * OpenTelemetry environment variables (base + /v1/traces, or the traces URL as is), strict keys,
 * and problems reported without printing the value.
 *
 * Mutation that fails it: in src/config/otel-env.ts, drop `v1/traces` from the pathname
 * (`url.pathname = url.pathname`): "appends /v1/traces to OTEL_EXPORTER_OTLP_ENDPOINT" fails.
 */
import { randomBytes } from 'node:crypto';
import { parseConfig } from '../../../src/config/load.js';
import { configProblems } from '../../support/config.js';
import { tracingEndpointFromEnv } from '../../../src/config/otel-env.js';

const minimal = (observability?: unknown) => ({
  server: { publicUrl: 'https://app.example.com' },
  oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientSecret: 'top-secret-value' },
  session: { secrets: [randomBytes(30).toString('base64')], encryptionKeys: [randomBytes(32).toString('base64')] },
  redis: { url: 'redis://127.0.0.1:6379' },
  ...(observability === undefined ? {} : { observability }),
});

const tracingOf = (observability?: unknown, env: Record<string, string> = {}) => parseConfig(minimal(observability), { env }).observability.tracing;

const problems = (observability: unknown, env: Record<string, string> = {}): string[] => configProblems(minimal(observability), env);

describe('observability.tracing', () => {
  it('is off by default, with the documented defaults', () => {
    expect(tracingOf()).toEqual({ trustIncoming: false, serviceName: 'bff-gateway', sampleRatio: 1 });
  });

  it('takes an endpoint, trustIncoming, serviceName and sampleRatio from the file', () => {
    const tracing = tracingOf({ tracing: { endpoint: 'http://otel-collector:4318/v1/traces', trustIncoming: true, serviceName: 'edge', sampleRatio: 0.25 } });
    expect(tracing).toEqual({ endpoint: 'http://otel-collector:4318/v1/traces', trustIncoming: true, serviceName: 'edge', sampleRatio: 0.25 });
  });

  it.each([
    [{ tracing: { endpoint: 'otel-collector:4318' } }, 'observability.tracing.endpoint'],
    [{ tracing: { endpoint: 'ftp://collector/v1/traces' } }, 'observability.tracing.endpoint'],
    [{ tracing: { endpoint: 'https://user:pa55word-in-url@collector/v1/traces' } }, 'observability.tracing.endpoint'],
    [{ tracing: { sampleRatio: 1.5 } }, 'observability.tracing.sampleRatio'],
    [{ tracing: { trustIncoming: 'yes' } }, 'observability.tracing.trustIncoming'],
    [{ tracing: { endpont: 'http://collector:4318/v1/traces' } }, 'observability.tracing'],
    [{ traces: {} }, 'observability'],
  ])('refuses %j, naming %s and never printing the value', (observability, path) => {
    const found = problems(observability);
    expect(found.some((p) => p.startsWith(path))).toBe(true);
    expect(found.join('\n')).not.toContain('pa55word-in-url');
  });

  // SPEC §2's example names the collector's origin alone; used as is, every span went to `/`,
  // which a collector answers 404. Fails if load.ts keeps the file's endpoint as written
  // (`endpoint: tracesUrl(endpoint)` → `endpoint`).
  it("takes a bare origin in the file as the collector's base, and any path or query as written", () => {
    expect(tracingOf({ tracing: { endpoint: 'http://otel-collector:4318' } }).endpoint).toBe('http://otel-collector:4318/v1/traces');
    expect(tracingOf({ tracing: { endpoint: 'https://otel.example/' } }).endpoint).toBe('https://otel.example/v1/traces');
    expect(tracingOf({ tracing: { endpoint: 'https://otel.example/custom/traces' } }).endpoint).toBe('https://otel.example/custom/traces');
    expect(tracingOf({ tracing: { endpoint: 'https://otel.example/?tenant=a' } }).endpoint).toBe('https://otel.example/?tenant=a');
  });

  it('appends /v1/traces to OTEL_EXPORTER_OTLP_ENDPOINT when the file names no endpoint', () => {
    expect(tracingOf(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).endpoint).toBe('http://collector:4318/v1/traces');
    expect(tracingOf(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector/otlp/' }).endpoint).toBe('https://collector/otlp/v1/traces');
    expect(tracingOf({ tracing: { trustIncoming: true } }, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toMatchObject({
      endpoint: 'http://collector:4318/v1/traces',
      trustIncoming: true,
    });
  });

  // Found by review: the file's rule reached the variable too (the schema rewrote whatever it
  // was given), where the OTel spec and the README use it as is. Fails if the rewrite is made
  // on the parsed config rather than on the file's value alone.
  it('uses a bare-origin OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is', () => {
    expect(tracingOf(undefined, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318' }).endpoint).toBe('http://collector:4318');
  });

  it('uses OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, before the base one', () => {
    const env = { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:4318/custom', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(tracingOf(undefined, env).endpoint).toBe('http://traces:4318/custom');
  });

  it('keeps the file’s endpoint over the environment, and ignores empty variables', () => {
    const file = { tracing: { endpoint: 'http://file:4318/v1/traces' } };
    expect(tracingOf(file, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318' }).endpoint).toBe('http://file:4318/v1/traces');
    expect(tracingOf(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: '' }).endpoint).toBeUndefined();
  });

  it('reports a malformed variable by name, without its value', () => {
    expect(problems(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318?key=s3cr3t-value' })).toEqual([
      'OTEL_EXPORTER_OTLP_ENDPOINT: must be an absolute http(s) URL',
    ]);
    expect(tracingEndpointFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'nope' })).toEqual({
      problem: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: must be an absolute http(s) URL',
    });
  });
});
