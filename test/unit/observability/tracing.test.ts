/**
 * tracing.ts on its own, with an in-memory exporter: off is the shared no-op; a failure is
 * recorded by code only (no message, no exception event); inject replaces whatever trace
 * context the headers held; the active span is found through awaits.
 *
 * Mutation that fails it: in src/observability/tracing.ts OtelSpan.fail, add
 * `this.span.setStatus({ code: SpanStatusCode.ERROR, message: code })` or call
 * `this.span.recordException(...)`; or delete the `for (const name of TRACE_HEADERS) delete
 * carrier[name];` line in inject ("replaces the browser's tracestate" fails).
 */
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { GatewayError } from '../../../src/errors.js';
import { createTracing, NO_TRACING, type Tracing } from '../../../src/observability/tracing.js';

const config = { trustIncoming: false, serviceName: 'bff-gateway', sampleRatio: 1 };

describe('tracing off', () => {
  it('is the shared no-op when no endpoint is configured', async () => {
    expect(await createTracing(config)).toBe(NO_TRACING);
    expect(NO_TRACING.enabled).toBe(false);
    const headers: Record<string, string> = { traceparent: 'untouched' };
    NO_TRACING.inject(NO_TRACING.startSpan('x'), headers);
    expect(headers).toEqual({ traceparent: 'untouched' });
    expect(NO_TRACING.activeIds()).toBeUndefined();
  });
});

describe('tracing on', () => {
  let exporter: InMemorySpanExporter;
  let tracing: Tracing;
  beforeEach(async () => {
    exporter = new InMemorySpanExporter();
    tracing = await createTracing(config, { exporter });
  });
  afterEach(() => tracing.shutdown());

  const finished = async () => {
    await tracing.flush();
    return exporter.getFinishedSpans();
  };

  it('records a failure by its code only: no status message, no exception event', async () => {
    const secretMessage = 'provider said: refresh_token=rt-5ecret';
    await expect(
      tracing.inSpan('session.refresh', {}, async () => {
        throw new GatewayError('token_refresh_failed', { cause: new Error(secretMessage) });
      }),
    ).rejects.toThrow(GatewayError);
    await expect(tracing.inSpan('oidc.token', {}, () => Promise.reject(new Error(secretMessage)))).rejects.toThrow();
    const spans = await finished();
    expect(spans.map((s) => [s.name, s.attributes['error.type'], s.status.code, s.status.message ?? '', s.events.length])).toEqual([
      ['session.refresh', 'token_refresh_failed', 2, '', 0],
      ['oidc.token', 'error', 2, '', 0],
    ]);
    expect(JSON.stringify(spans.map((s) => [s.attributes, s.status, s.events]))).not.toContain('5ecret');
  });

  it('finds the active span through awaits: children and log ids', async () => {
    const server = tracing.startServerSpan('proxy /api', {}, { 'http.route': '/api' });
    let ids: ReturnType<Tracing['activeIds']>;
    await tracing.withSpan(server, async () => {
      await new Promise((r) => setImmediate(r));
      await tracing.inSpan('session.read', {}, async () => {
        await new Promise((r) => setImmediate(r));
        ids = tracing.activeIds();
      });
    });
    server.end();
    const [read, proxy] = await finished();
    expect(read?.parentSpanContext?.spanId).toBe(proxy?.spanContext().spanId);
    expect(ids).toEqual({ trace_id: read?.spanContext().traceId, span_id: read?.spanContext().spanId });
    expect(tracing.activeIds()).toBeUndefined();
  });

  it('replaces the browser’s traceparent and tracestate with the span’s own', async () => {
    const headers: Record<string, string> = {
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      tracestate: 'browser=1',
    };
    const span = tracing.startServerSpan('proxy /api', headers, {});
    tracing.inject(span, headers);
    span.end();
    const [exported] = await finished();
    expect(headers).toEqual({ traceparent: `00-${exported?.spanContext().traceId}-${exported?.spanContext().spanId}-01` });
    expect(exported?.spanContext().traceId).not.toBe('4bf92f3577b34da6a3ce929d0e0e4736');
  });

  it('with sampleRatio 0 records nothing but still propagates a trace context, marked not sampled', async () => {
    await tracing.shutdown();
    tracing = await createTracing({ ...config, sampleRatio: 0 }, { exporter });
    const headers: Record<string, string> = {};
    const span = tracing.startServerSpan('proxy /api', {}, {});
    tracing.inject(span, headers);
    span.end();
    expect(headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    expect(await finished()).toEqual([]);
  });
});
