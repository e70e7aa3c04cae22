import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  context,
  diag,
  isSpanContextValid,
  propagation,
  trace,
  type Context,
  type DiagLogger,
  type Span,
  type SpanContext,
} from '@opentelemetry/api';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { NoopSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createLogger, errorMessage, randomHex, setLogContext } from '@memstream/kit';
// Type only: the bus owns the port it reports through; at run time the two meet in a global slot.
import type { BusTelemetry, ConsumeResult } from '../../bus/src/events.js';
import { telemetryConfigFrom, type TelemetryConfig } from './config.js';
import { eventsPublished, initMetrics, recordOutcome, scrape, watchConsumer } from './metrics.js';

const TRACER = 'memstream';
const BUS_SLOT = Symbol.for('memstream.bus.telemetry');

interface Started {
  config: TelemetryConfig;
  sdk: NodeSDK;
  /** Whether spans go anywhere (an exporter, or a test's processors): else only their ids are carried. */
  recordSpans: boolean;
}
let started: Started | null = null;

/** The tracer every memstream span comes from (a no-op one until the SDK is started). */
export function tracer() {
  return trace.getTracer(TRACER);
}

/** The W3C headers (traceparent, tracestate) that carry `ctx` on. */
export function traceHeaders(ctx: Context): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier;
}

/** A copy of `headers` with the W3C headers of `ctx` put in (one object per message, not two). */
function withTraceHeaders(headers: Record<string, string>, ctx: Context): Record<string, string> {
  const carrier = { ...headers };
  propagation.inject(ctx, carrier);
  return carrier;
}

/** traceId and spanId of the active span, for log lines. */
export function logFields(): Record<string, string> | undefined {
  const span = trace.getActiveSpan();
  if (!span) return undefined;
  const c = span.spanContext();
  return isSpanContextValid(c) ? { traceId: c.traceId, spanId: c.spanId } : undefined;
}

/**
 * Start the OpenTelemetry Node SDK once per process, before the application code (a service's
 * main.ts imports @memstream/telemetry first), and install the bus's tracing and metrics and the
 * log lines' trace ids.
 *
 * Spans are always made (a W3C trace runs through every stage, and its ids reach the logs and
 * x-trace-id), but leave the process only when OTEL_TRACES_EXPORTER or an OTLP endpoint says so.
 * `spanProcessors` replaces the exporters (tests: an in-memory exporter).
 */
export function startTelemetry(opts: { env?: NodeJS.ProcessEnv; entry?: string; spanProcessors?: SpanProcessor[] } = {}): TelemetryConfig {
  if (started) return started.config;
  const config = telemetryConfigFrom(opts.env ?? process.env, opts.entry ?? process.argv[1]);
  // Made on the first SDK complaint only (a pretty logger starts a worker thread).
  let diagLog: ReturnType<typeof createLogger> | null = null;
  const warn = (msg: string, args: unknown[]) => (diagLog ??= createLogger(config.service)).warn({ otel: args.map(String).join(' ') }, `opentelemetry: ${msg}`);
  const processors = opts.spanProcessors ?? (config.exportTraces ? undefined : [new NoopSpanProcessor()]);
  const sdk = new NodeSDK({
    serviceName: config.serviceName,
    // Metrics are prom-client's and logs pino's: no OTel metric reader or log exporter, whose
    // defaults would post OTLP to localhost every minute.
    metricReaders: [],
    logRecordProcessors: [],
    // Without processors the SDK reads OTEL_TRACES_EXPORTER / OTEL_EXPORTER_OTLP_* itself.
    ...(processors ? { spanProcessors: processors } : {}),
  });
  if (!process.env.OTEL_LOG_LEVEL) {
    // The SDK's own troubles (an unreachable collector) as warnings in the service's log.
    const toLog: DiagLogger = {
      error: (msg, ...args) => warn(msg, args),
      warn: (msg, ...args) => warn(msg, args),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    };
    diag.setLogger(toLog, { suppressOverrideMessage: true });
  }
  sdk.start();
  // Spans are recorded only when something takes them (an exporter, or a test's processors).
  const recordSpans = Boolean(opts.spanProcessors) || config.exportTraces;
  started = { config, sdk, recordSpans };
  initMetrics(config.service);
  setLogContext(logFields);
  (globalThis as Record<symbol, unknown>)[BUS_SLOT] = busTelemetry(config, { recordSpans });
  return config;
}

/** Whether this process records spans (startTelemetry: an exporter or span processors); false before it started. */
export function spansRecorded(): boolean {
  return started?.recordSpans ?? false;
}

/** Export what is buffered and stop: the last step of shutdown. */
let shutdown: Promise<void> | null = null;
/**
 * Flush and stop the SDK, once per process: the services of a worker host each flush their
 * telemetry as their last shutdown step, and the SDK warns on a second shutdown.
 */
export async function shutdownTelemetry(): Promise<void> {
  if (!started) return;
  await (shutdown ??= started.sdk.shutdown().catch(() => {}));
}

function endSpan(span: Span, err: unknown): void {
  span.recordException(err instanceof Error ? err : new Error(String(err)));
  span.setStatus({ code: SpanStatusCode.ERROR, message: errorMessage(err) });
  span.end();
}

const FAILED: ReadonlySet<string> = new Set(['retried', 'failed', 'dead-lettered']);

/**
 * The headers a message's handler carries on without a recorded span: the message's trace id
 * and a new span id in its traceparent. With no exporter, a recorded span per message and per
 * publish cost about 15 % of a stage's CPU and went nowhere; and running each handler in an
 * OpenTelemetry context turns on Node's async context tracking, a hook on every promise of the
 * process. The ids alone keep one trace per document in the headers and, through the runner's
 * message logger (BusTelemetry.logBindings), in the log lines.
 */
function continuedHeaders(headers: Record<string, string>): Record<string, string> {
  const m = headers.traceparent ? TRACEPARENT.exec(headers.traceparent) : null;
  const traceId = m && !/^0+$/.test(m[1]!) ? m[1]! : randomHex(16);
  return { ...headers, traceparent: `00-${traceId}-${randomHex(8)}-01` };
}

/**
 * The bus's tracing and metrics: a producer span per publish, a consumer span per message; or,
 * when `recordSpans` is false (no exporter), the same trace ids carried through the headers and
 * the logs without span objects.
 */
/** Runs a message's handler in `ctx` and records its outcome and time: the one body of both consume paths (with and without spans). */
async function handleMeasured<R extends ConsumeResult>(
  info: Parameters<BusTelemetry['consume']>[0],
  ctx: Context | null,
  handle: (headers: Record<string, string>) => Promise<R>,
): Promise<R> {
  const t0 = performance.now();
  let result: R;
  try {
    // Without a span (ctx null), no context is entered: see continuedHeaders.
    result = await (ctx ? context.with(ctx, () => handle(withTraceHeaders(info.headers, ctx))) : handle(continuedHeaders(info.headers)));
  } catch (err) {
    recordOutcome({ stage: info.consumer, event: info.kind, outcome: 'error', seconds: (performance.now() - t0) / 1000 });
    throw err;
  }
  recordOutcome({ stage: info.consumer, event: info.kind, outcome: result.outcome, failureClass: result.failureClass, seconds: (performance.now() - t0) / 1000 });
  return result;
}

export function busTelemetry(config: TelemetryConfig, opts: { recordSpans?: boolean } = {}): BusTelemetry {
  if (opts.recordSpans === false) {
    return {
      async publish(info, send) {
        // The message's traceparent (the gateway's request, the runner's message) goes on as it is.
        const headers = info.headers.traceparent ? info.headers : withTraceHeaders(info.headers, context.active());
        const out = await send(headers);
        eventsPublished.inc({ event: info.eventType });
        return out;
      },
      async consume<R extends ConsumeResult>(info: Parameters<BusTelemetry['consume']>[0], handle: (headers: Record<string, string>) => Promise<R>): Promise<R> {
        return handleMeasured(info, null, handle);
      },
      // No context carries the ids to the log lines' mixin: the message's logger binds them.
      logBindings(headers) {
        const m = headers.traceparent ? TRACEPARENT.exec(headers.traceparent) : null;
        return m ? { traceId: m[1]!, spanId: m[2]! } : undefined;
      },
      watchConsumer,
      metrics: (authorization) => scrape(authorization, config.metricsToken),
      flush: shutdownTelemetry,
    };
  }
  return {
    async publish(info, send) {
      // The headers' traceparent (the gateway's request, the runner's message) is the parent; else the active span.
      const parent = info.headers.traceparent ? propagation.extract(context.active(), info.headers) : context.active();
      const span = tracer().startSpan(
        `publish ${info.eventType}`,
        {
          kind: SpanKind.PRODUCER,
          attributes: {
            'messaging.system': 'nats',
            'messaging.operation.type': 'send',
            'messaging.destination.name': info.subject,
            'memstream.document.id': info.documentId,
            'memstream.event.type': info.eventType,
          },
        },
        parent,
      );
      const ctx = trace.setSpan(parent, span);
      try {
        // No context.with here: `send` only hands the message to NATS (nothing in it reads the
        // active context), and the span reaches the next stage through the headers.
        const out = await send(withTraceHeaders(info.headers, ctx));
        eventsPublished.inc({ event: info.eventType });
        span.end();
        return out;
      } catch (err) {
        endSpan(span, err);
        throw err;
      }
    },

    async consume<R extends ConsumeResult>(info: Parameters<BusTelemetry['consume']>[0], handle: (headers: Record<string, string>) => Promise<R>): Promise<R> {
      const parent = propagation.extract(ROOT_CONTEXT, info.headers);
      const span = tracer().startSpan(
        `process ${info.kind}`,
        {
          kind: SpanKind.CONSUMER,
          attributes: {
            'messaging.system': 'nats',
            'messaging.operation.type': 'process',
            'messaging.destination.name': info.subject,
            'messaging.consumer.group.name': info.consumer,
            'messaging.message.delivery_count': info.deliveryCount,
            'messaging.nats.stream_sequence': info.seq,
            'memstream.document.id': info.documentId,
          },
        },
        parent,
      );
      const ctx = trace.setSpan(parent, span);
      let result: R;
      try {
        result = await handleMeasured(info, ctx, handle);
      } catch (err) {
        endSpan(span, err);
        throw err;
      }
      span.setAttribute('memstream.outcome', result.outcome);
      if (result.eventType) span.setAttribute('memstream.event.type', result.eventType);
      if (result.revision !== undefined) span.setAttribute('memstream.revision', result.revision);
      if (result.failureClass) span.setAttribute('memstream.failure.class', result.failureClass);
      if (FAILED.has(result.outcome)) span.setStatus({ code: SpanStatusCode.ERROR, message: result.reason ?? result.outcome });
      span.end();
      return result;
    },

    watchConsumer,
    metrics: (authorization) => scrape(authorization, config.metricsToken),
    flush: shutdownTelemetry,
  };
}

const TRACEPARENT = /^00-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})$/;

/**
 * The span context a request continues: the SDK's span when it runs; else (OTEL_SDK_DISABLED)
 * the request's own valid traceparent, or new random ids, so x-trace-id and the published
 * traceparent are always right.
 */
export function requestSpanContext(span: Span, incoming: string | undefined): SpanContext {
  const c = span.spanContext();
  return isSpanContextValid(c) ? c : continuedSpanContext(incoming);
}

/**
 * A request's span context without a span (none recorded, or the SDK disabled): the trace of its
 * valid traceparent, or a new one, and a new span id; the ids a recorded span would have.
 */
export function continuedSpanContext(incoming: string | undefined): SpanContext {
  const m = incoming ? TRACEPARENT.exec(incoming) : null;
  if (m && !/^0+$/.test(m[1]!) && !/^0+$/.test(m[2]!)) return { traceId: m[1]!, spanId: randomHex(8), traceFlags: TraceFlags.SAMPLED };
  return { traceId: randomHex(16), spanId: randomHex(8), traceFlags: TraceFlags.SAMPLED };
}

export function formatTraceparent(c: SpanContext): string {
  return `00-${c.traceId}-${c.spanId}-${(c.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}
