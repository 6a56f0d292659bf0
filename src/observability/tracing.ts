/**
 * OpenTelemetry traces (issue 17): the one home of `@opentelemetry/*`. Everything else sees the
 * small `Tracing` interface below, in the gateway's own words (a span has a name, a kind, plain
 * attributes and, when it failed, an error code), never OpenTelemetry's types.
 *
 * Off (no `observability.tracing.endpoint`): `NO_TRACING`, whose `enabled` is false, and the
 * OpenTelemetry packages are never loaded (they are imported dynamically, only when on). Callers
 * on the hot path test `enabled` once, when they are built, and then do no per-call work at
 * all; the no-op methods exist so that cold paths need not test it.
 *
 * On: a TracerProvider with a BatchSpanProcessor exporting OTLP/HTTP (JSON) to the endpoint, a
 * parent-based ratio sampler, and the W3C trace-context propagator. No global is registered
 * (no global tracer provider, context manager or propagator: several runtimes share a test
 * process, and module state is the runtime's alone): the active span is carried by this
 * instance's own AsyncLocalStorage, so a child span (session.read, oidc.token...) started deep
 * in a domain module finds its parent without being handed it.
 *
 * What a span may carry is decided by its callers, from fixed vocabularies: route templates
 * from the config, methods, status codes, outcome and error codes. No message of an error is
 * ever recorded (`fail` takes a code): provider answers and URLs can carry codes and tokens.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Context, Span, SpanKind, SpanStatusCode, TextMapGetter, TextMapSetter } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import { GatewayError } from '../errors.js';

/** The code a failed span records: the GatewayError's, else a generic one (never a message). */
export const errorCodeOf = (err: unknown): string => (err instanceof GatewayError ? err.code : 'error');

export type SpanAttributes = Readonly<Record<string, string | number | boolean>>;
export type SpanKindName = 'server' | 'client' | 'internal';

export interface SpanHandle {
  setAttributes(attributes: SpanAttributes): void;
  /** Marks the span failed with a code from a fixed vocabulary (an error code), never a message. */
  fail(code: string): void;
  /** Ends the span; later calls are ignored. */
  end(): void;
}

export interface SpanOptions {
  kind?: SpanKindName;
  attributes?: SpanAttributes;
}

/** The W3C headers the gateway reads from browsers and writes to upstreams. */
export const TRACE_HEADERS: readonly string[] = ['traceparent', 'tracestate'];

export interface Tracing {
  readonly enabled: boolean;
  /** A span, child of the active one (or a root when none is active). */
  startSpan(name: string, options?: SpanOptions): SpanHandle;
  /**
   * A SERVER span for a request from a browser: the child of the request's `traceparent` when
   * `trustIncoming` is set, a new trace otherwise (the browser's headers are then ignored).
   */
  startServerSpan(name: string, headers: IncomingHttpHeaders, attributes: SpanAttributes): SpanHandle;
  /** Runs `fn` with `span` active: spans started in it (and in what it awaits) are its children. */
  withSpan<T>(span: SpanHandle, fn: () => T): T;
  /** `work` inside a child span of the active one; the span ends with it, failed with `codeOf(err)` if it throws. */
  inSpan<T>(name: string, options: SpanOptions, work: (span: SpanHandle) => Promise<T>, codeOf?: (err: unknown) => string): Promise<T>;
  /** Adds attributes to the active span, if any. */
  annotate(attributes: SpanAttributes): void;
  /**
   * Writes `span`'s traceparent (and tracestate, when it has one) into `headers`, after removing
   * whatever traceparent/tracestate they held: only the gateway's own trace context goes on.
   */
  inject(span: SpanHandle, headers: IncomingHttpHeaders | OutgoingHttpHeaders | Record<string, string>): void;
  /** The active span's ids, for log lines. */
  activeIds(): { trace_id: string; span_id: string } | undefined;
  /** Exports what has ended so far. */
  flush(): Promise<void>;
  /** Exports what is pending and stops (runtime.close()). */
  shutdown(): Promise<void>;
}

export interface TracingConfig {
  endpoint?: string | undefined;
  trustIncoming: boolean;
  serviceName: string;
  sampleRatio: number;
}

const NOOP_SPAN: SpanHandle = Object.freeze({
  setAttributes() {},
  fail() {},
  end() {},
});

/** Tracing off: nothing is created, nothing is exported, headers are never touched. */
export const NO_TRACING: Tracing = Object.freeze({
  enabled: false,
  startSpan: () => NOOP_SPAN,
  startServerSpan: () => NOOP_SPAN,
  withSpan: <T,>(_span: SpanHandle, fn: () => T): T => fn(),
  inSpan: <T,>(_name: string, _options: SpanOptions, work: (span: SpanHandle) => Promise<T>): Promise<T> => work(NOOP_SPAN),
  annotate() {},
  inject() {},
  activeIds: () => undefined,
  flush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
});

/** A handle over an OpenTelemetry span: what the rest of the gateway holds. */
class OtelSpan implements SpanHandle {
  constructor(
    readonly span: Span,
    private readonly errorStatus: SpanStatusCode,
  ) {}
  setAttributes(attributes: SpanAttributes): void {
    this.span.setAttributes(attributes);
  }
  fail(code: string): void {
    // The code is the whole story: a status description or an exception event would carry
    // the error's message, and messages can quote a provider's answer or a URL.
    this.span.setAttribute('error.type', code);
    this.span.setStatus({ code: this.errorStatus });
  }
  end(): void {
    this.span.end();
  }
}

const headerGetter: TextMapGetter<IncomingHttpHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};
const headerSetter: TextMapSetter<Record<string, unknown>> = {
  set: (carrier, key, value) => {
    carrier[key] = value;
  },
};

export interface TracingOptions {
  /** Where spans go instead of OTLP/HTTP (tests of this module). */
  exporter?: SpanExporter;
}

export async function createTracing(config: TracingConfig, options: TracingOptions = {}): Promise<Tracing> {
  if (config.endpoint === undefined && options.exporter === undefined) return NO_TRACING;
  // Loaded only now: with tracing off, the OpenTelemetry packages are not even read.
  const [{ ROOT_CONTEXT, SpanKind, SpanStatusCode, trace }, { W3CTraceContextPropagator }, { OTLPTraceExporter }, { defaultResource, resourceFromAttributes }, sdk] =
    await Promise.all([
      import('@opentelemetry/api'),
      import('@opentelemetry/core'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/sdk-trace'),
    ]);
  const { BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider } = sdk;
  const KINDS: Record<SpanKindName, SpanKind> = { server: SpanKind.SERVER, client: SpanKind.CLIENT, internal: SpanKind.INTERNAL };
  const exporter = options.exporter ?? new OTLPTraceExporter({ url: config.endpoint as string });
  const provider = new TracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': config.serviceName })),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.sampleRatio) }),
    spanProcessors: [new BatchSpanProcessor({ exporter })],
  });
  const tracer = provider.getTracer('bff-gateway');
  const propagator = new W3CTraceContextPropagator();
  const active = new AsyncLocalStorage<Context>();
  const current = (): Context => active.getStore() ?? ROOT_CONTEXT;

  function start(name: string, options: SpanOptions, parent: Context): OtelSpan {
    return new OtelSpan(
      tracer.startSpan(name, { kind: KINDS[options.kind ?? 'internal'], ...(options.attributes ? { attributes: options.attributes } : {}) }, parent),
      SpanStatusCode.ERROR,
    );
  }
  const contextOf = (span: SpanHandle): Context =>
    span instanceof OtelSpan ? trace.setSpan(current(), span.span) : current();

  let closed: Promise<void> | undefined;
  return {
    enabled: true,
    startSpan: (name, options = {}) => start(name, options, current()),
    startServerSpan(name, headers, attributes) {
      // Untrusted: the browser's trace context is not even parsed.
      const parent = config.trustIncoming ? propagator.extract(ROOT_CONTEXT, headers, headerGetter) : ROOT_CONTEXT;
      return start(name, { kind: 'server', attributes }, parent);
    },
    withSpan: (span, fn) => active.run(contextOf(span), fn),
    async inSpan(name, options, work, codeOf) {
      const span = start(name, options, current());
      try {
        return await active.run(trace.setSpan(current(), span.span), () => work(span));
      } catch (err) {
        span.fail((codeOf ?? errorCodeOf)(err));
        throw err;
      } finally {
        span.end();
      }
    },
    annotate(attributes) {
      trace.getSpan(current())?.setAttributes(attributes);
    },
    inject(span, headers) {
      const carrier = headers as Record<string, unknown>;
      for (const name of TRACE_HEADERS) delete carrier[name];
      if (span instanceof OtelSpan) propagator.inject(trace.setSpan(ROOT_CONTEXT, span.span), carrier, headerSetter);
    },
    activeIds() {
      const context = trace.getSpan(current())?.spanContext();
      return context ? { trace_id: context.traceId, span_id: context.spanId } : undefined;
    },
    flush: () => provider.forceFlush(),
    shutdown() {
      closed ??= provider.shutdown().catch(() => undefined);
      return closed;
    },
  };
}
