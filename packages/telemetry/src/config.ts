import path from 'node:path';

/** The telemetry's own settings, read once from the environment (the OTEL_* ones are the SDK's). */
export interface TelemetryConfig {
  /** OTel service.name: OTEL_SERVICE_NAME, else memstream-<service> (MEMSTREAM_PROCESS, or from the entry file). */
  serviceName: string;
  /** The short service name: the `service` label on every metric. */
  service: string;
  /** Whether spans are exported (see tracesExportEnabled). */
  exportTraces: boolean;
  /** MEMSTREAM_METRICS_TOKEN: when set, /metrics wants `Authorization: Bearer <token>`. */
  metricsToken: string | null;
}

/**
 * Spans leave the process only when asked: OTEL_TRACES_EXPORTER names an exporter other than
 * none, or an OTLP endpoint is set. The OTel default (otlp to localhost:4318 when nothing is set)
 * would have every service try the network on every batch, so it is not followed here.
 */
export function tracesExportEnabled(env: NodeJS.ProcessEnv): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (exporters.length > 0) return !exporters.includes('none');
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/** `services/<name>/src/main.ts` → `<name>`; anything else (a test, the CLI) → `memstream`. */
export function serviceFromEntry(entry: string | undefined): string {
  if (!entry) return 'memstream';
  const parts = path.resolve(entry).split(path.sep);
  const i = parts.lastIndexOf('services');
  return i >= 0 && parts[i + 2] === 'src' && parts[i + 1] ? parts[i + 1]! : 'memstream';
}

/**
 * The process's service name: MEMSTREAM_PROCESS when the launcher names it (a worker host runs
 * several services in one process: packages/cli/src/host.ts, `stages` or `stores`), else the
 * entry file's service.
 */
export function telemetryConfigFrom(env: NodeJS.ProcessEnv = process.env, entry: string | undefined = process.argv[1]): TelemetryConfig {
  const service = env.MEMSTREAM_PROCESS?.trim() || serviceFromEntry(entry);
  return {
    service,
    serviceName: env.OTEL_SERVICE_NAME?.trim() || (service === 'memstream' ? 'memstream' : `memstream-${service}`),
    exportTraces: tracesExportEnabled(env),
    metricsToken: env.MEMSTREAM_METRICS_TOKEN?.trim() || null,
  };
}
