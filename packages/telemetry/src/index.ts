// Side effect first: importing @memstream/telemetry starts the OpenTelemetry SDK for this
// process (once). A service's main.ts imports it before anything else.
import './register.js';

export { startTelemetry, shutdownTelemetry, logFields, traceHeaders, tracer, busTelemetry } from './tracing.js';
export { httpTelemetry, keepContext, metricsHandler, requestTraceFields } from './http.js';
export { registry, watchConsumer, watchDocumentStatuses, recordOutcome, recordWebhookDelivery, recordMemorized, recordMemoryChanges, scrape } from './metrics.js';
export { telemetryConfigFrom, tracesExportEnabled, type TelemetryConfig } from './config.js';
