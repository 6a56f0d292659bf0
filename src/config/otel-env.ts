/**
 * The OpenTelemetry exporter environment variables the gateway honours when the config file
 * sets no `observability.tracing.endpoint` (OTLP exporter spec, "Endpoint URLs for OTLP/HTTP"):
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the traces URL as is; OTEL_EXPORTER_OTLP_ENDPOINT is a
 * base URL to which `v1/traces` is appended. The signal-specific one wins; empty means unset.
 * Pure: the environment is passed in.
 */

export type TracingEndpointFromEnv =
  | { endpoint: string }
  | { problem: string }
  | undefined;

const isHttpUrl = (v: string) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol);

export function tracingEndpointFromEnv(env: Readonly<Record<string, string | undefined>>): TracingEndpointFromEnv {
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) {
    // The value itself is never printed: an endpoint URL may carry a token in its query.
    return isHttpUrl(traces) ? { endpoint: traces } : { problem: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: must be an absolute http(s) URL' };
  }
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!base) return undefined;
  if (!isHttpUrl(base)) return { problem: 'OTEL_EXPORTER_OTLP_ENDPOINT: must be an absolute http(s) URL' };
  const url = new URL(base);
  url.pathname = `${url.pathname.endsWith('/') ? url.pathname : `${url.pathname}/`}v1/traces`;
  return { endpoint: url.href };
}

/**
 * The file's traces URL: as written, but a bare origin (`http://otel-collector:4318`, with or
 * without `/`, no query, as SPEC §2's example writes it) is the collector's base, whose traces URL is
 * `/v1/traces` (a collector answers 404 at `/`, and every span was lost).
 */
export function tracesUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (url.pathname !== '/' || url.search !== '') return endpoint;
  url.pathname = '/v1/traces';
  return url.href;
}
