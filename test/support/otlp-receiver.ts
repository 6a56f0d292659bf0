/**
 * A test OpenTelemetry collector: an OTLP/HTTP receiver on 127.0.0.1 that keeps every export
 * request it gets (the exporter's JSON encoding, `POST /v1/traces`) and decodes its spans.
 * `bodies` keeps the raw text of each request, so a leak scan searches exactly what left the
 * gateway (names, attributes, events, status messages, resource), not a decoded subset.
 */
import http from 'node:http';
import { closeServer, listenOnLoopback } from './listen.js';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  statusMessage: string;
  events: unknown[];
  resource: Record<string, string | number | boolean>;
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3 } as const;

export interface OtlpReceiver {
  /** The traces URL to configure (observability.tracing.endpoint). */
  url: string;
  /** The base URL (what OTEL_EXPORTER_OTLP_ENDPOINT names). */
  baseUrl: string;
  spans: ReceivedSpan[];
  /** Raw request bodies, one per export. */
  bodies: string[];
  /** Requests of any kind, including ones the receiver did not understand. */
  requests: Array<{ method: string; path: string; contentType: string }>;
  reset(): void;
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };

function attributesOf(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
  }
  return out;
}

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: KeyValue[];
        status?: { code?: number; message?: string };
        events?: unknown[];
      }>;
    }>;
  }>;
}

export function decodeExport(text: string): ReceivedSpan[] {
  const request = JSON.parse(text) as ExportRequest;
  const spans: ReceivedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        spans.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          name: s.name,
          kind: s.kind,
          attributes: attributesOf(s.attributes),
          statusCode: s.status?.code ?? 0,
          statusMessage: s.status?.message ?? '',
          events: s.events ?? [],
          resource,
        });
      }
    }
  }
  return spans;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const requests: OtlpReceiver['requests'] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const contentType = String(req.headers['content-type'] ?? '');
      requests.push({ method: req.method ?? '', path: req.url ?? '', contentType });
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !contentType.startsWith('application/json')) {
        res.writeHead(415).end();
        return;
      }
      const text = Buffer.concat(chunks).toString('utf8');
      bodies.push(text);
      spans.push(...decodeExport(text));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const port = await listenOnLoopback(server);
  const baseUrl = `http://127.0.0.1:${port}`;
  return {
    url: `${baseUrl}/v1/traces`,
    baseUrl,
    spans,
    bodies,
    requests,
    reset() {
      spans.length = 0;
      bodies.length = 0;
      requests.length = 0;
    },
    close: () => closeServer(server),
  };
}
