import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { SpanKind, context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { BusTelemetry } from '../../bus/src/events.js';
import { serviceFromEntry, tracesExportEnabled } from './config.js';
import { httpTelemetry, keepContext, requestTraceFields } from './http.js';
import { scrape, watchConsumer, watchDocumentStatuses } from './metrics.js';
import { busTelemetry, logFields, startTelemetry, tracer } from './tracing.js';

const exporter = new InMemorySpanExporter();
const processor = new SimpleSpanProcessor(exporter);
let bus: BusTelemetry;

/** Finished spans: the processor waits for the resource's async attributes (host id) before exporting. */
async function finished() {
  await processor.forceFlush();
  return exporter.getFinishedSpans();
}

/** The value of the series `name` whose labels include `labels`, in a Prometheus text exposition. */
function valueIn(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

async function sample(name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  return valueIn((await scrape(undefined, null)).body, name, labels);
}

beforeAll(() => {
  const config = startTelemetry({ env: { MEMSTREAM_METRICS_TOKEN: 's3cret' }, entry: '/srv/memstream/services/extractor/src/main.ts', spanProcessors: [processor] });
  expect(config.serviceName).toBe('memstream-extractor');
  bus = (globalThis as Record<symbol, unknown>)[Symbol.for('memstream.bus.telemetry')] as BusTelemetry;
});

describe('configuration', () => {
  it('exports spans only when asked: an exporter named, or an OTLP endpoint', () => {
    expect(tracesExportEnabled({})).toBe(false);
    expect(tracesExportEnabled({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracesExportEnabled({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(tracesExportEnabled({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(tracesExportEnabled({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(false);
    expect(tracesExportEnabled({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' })).toBe(false);
  });
  it('names the service after its entry file', () => {
    expect(serviceFromEntry('/repo/services/gateway/src/main.ts')).toBe('gateway');
    expect(serviceFromEntry('/repo/node_modules/vitest/dist/cli.js')).toBe('memstream');
    expect(serviceFromEntry(undefined)).toBe('memstream');
  });
});

describe('bus tracing', () => {
  it('installs itself for the bus', () => {
    expect(typeof bus.consume).toBe('function');
  });

  it('continues the trace a message carries: consumer span under it, emitted events under a producer span under that', async () => {
    exporter.reset();
    const upstream = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    let carried: Record<string, string> = {};
    let published: Record<string, string> = {};
    const r = await bus.consume(
      { consumer: 'extractor', subject: 'doc.d1.submitted', documentId: 'd1', kind: 'submitted', seq: 7, deliveryCount: 1, headers: { traceparent: upstream } },
      async (headers) => {
        carried = headers;
        await bus.publish({ subject: 'doc.d1.extracted', eventType: 'document.extracted.v1', documentId: 'd1', headers }, async (h) => {
          published = h;
          return 1;
        });
        return { outcome: 'handled' as const, eventType: 'document.submitted.v1', revision: 3 };
      },
    );
    expect(r.outcome).toBe('handled');
    const spans = await finished();
    const consumer = spans.find((s) => s.kind === SpanKind.CONSUMER)!;
    const producer = spans.find((s) => s.kind === SpanKind.PRODUCER)!;
    expect(consumer.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(consumer.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(consumer.name).toBe('process submitted');
    expect(consumer.attributes['memstream.revision']).toBe(3);
    expect(carried.traceparent).toBe(`00-${consumer.spanContext().traceId}-${consumer.spanContext().spanId}-01`);
    expect(producer.parentSpanContext?.spanId).toBe(consumer.spanContext().spanId);
    expect(published.traceparent).toBe(`00-${producer.spanContext().traceId}-${producer.spanContext().spanId}-01`);
    expect(consumer.resource.attributes['service.name']).toBe('memstream-extractor');
  });

  it('starts a new trace for a message without one, and marks failures on the span', async () => {
    exporter.reset();
    await bus.consume({ consumer: 'chunker', subject: 'doc.d2.extracted', documentId: 'd2', kind: 'extracted', seq: 8, deliveryCount: 5, headers: {} }, async () => ({
      outcome: 'dead-lettered' as const,
      failureClass: 'exhausted',
      reason: 'broker away',
    }));
    const [span] = (await finished());
    expect(span!.parentSpanContext).toBeUndefined();
    expect(span!.status.code).toBe(2);
    expect(span!.attributes['memstream.failure.class']).toBe('exhausted');
  });

  it('publishes under the active span when the headers carry no trace', async () => {
    exporter.reset();
    await tracer().startActiveSpan('outer', async (outer) => {
      await bus.publish({ subject: 'doc.d3.deleted', eventType: 'document.deleted.v1', documentId: 'd3', headers: {} }, async () => 0);
      outer.end();
    });
    const producer = (await finished()).find((s) => s.kind === SpanKind.PRODUCER)!;
    const outer = (await finished()).find((s) => s.name === 'outer')!;
    expect(producer.parentSpanContext?.spanId).toBe(outer.spanContext().spanId);
  });

  it('puts the active span into log lines', () => {
    expect(logFields()).toBeUndefined();
    const span = tracer().startSpan('x');
    const fields = context.with(trace.setSpan(context.active(), span), () => logFields());
    span.end();
    expect(fields).toEqual({ traceId: span.spanContext().traceId, spanId: span.spanContext().spanId });
  });
});

describe('tracing without an exporter', () => {
  it('keeps the trace id through consume and publish, with logs, but records no span and enters no context', async () => {
    const lean = busTelemetry({ service: 'x', serviceName: 'x', exportTraces: false, metricsToken: null }, { recordSpans: false });
    const before = (await finished()).length;
    const traceId = 'a'.repeat(32);
    const incoming = { traceparent: `00-${traceId}-${'b'.repeat(16)}-01` };
    let seen: { headers: Record<string, string>; log: Record<string, string> | undefined; published?: Record<string, string> } | null = null;
    await lean.consume({ consumer: 'chunker', subject: 'doc.d.extracted', documentId: 'd', kind: 'extracted', seq: 1, deliveryCount: 1, headers: incoming }, async (headers) => {
      let published: Record<string, string> | undefined;
      await lean.publish({ subject: 'doc.d.chunked', eventType: 'document.chunked.v1', documentId: 'd', headers }, async (h) => void (published = h));
      // No context is entered (Node's async context tracking stays off): the runner's message
      // logger binds the ids logBindings gives, and the active context has none.
      expect(logFields()).toBeUndefined();
      seen = { headers, log: lean.logBindings!(headers), ...(published ? { published } : {}) };
      return { outcome: 'handled' as const };
    });
    const got = seen as unknown as { headers: Record<string, string>; log: Record<string, string>; published: Record<string, string> };
    expect(got.headers.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    expect(got.headers.traceparent).not.toBe(incoming.traceparent);
    expect(got.log.traceId).toBe(traceId);
    expect(got.published.traceparent).toBe(got.headers.traceparent);
    expect((await finished()).length).toBe(before);
  });
});

describe('metrics', () => {
  it('counts outcomes by stage, event and class, and times them', async () => {
    const before = (await sample('memstream_events_total', { stage: 'embedder', event: 'chunked', outcome: 'failed' })) ?? 0;
    const local = busTelemetry({ service: 'x', serviceName: 'x', exportTraces: false, metricsToken: null });
    for (let i = 0; i < 3; i++) {
      await local.consume({ consumer: 'embedder', subject: 'doc.d.chunked', documentId: 'd', kind: 'chunked', seq: i, deliveryCount: 1, headers: {} }, async () => ({
        outcome: 'failed' as const,
        failureClass: 'permanent',
      }));
    }
    expect(await sample('memstream_events_total', { stage: 'embedder', event: 'chunked', outcome: 'failed' })).toBe(before + 3);
    expect(await sample('memstream_event_failures_total', { stage: 'embedder', class: 'permanent' })).toBeGreaterThanOrEqual(3);
    expect(await sample('memstream_stage_duration_seconds_count', { stage: 'embedder', outcome: 'failed', service: 'extractor' })).toBeGreaterThanOrEqual(3);
    expect(await sample('process_cpu_user_seconds_total')).toBeGreaterThan(0);
  });

  it('reads consumer backlogs and document counts at scrape time', async () => {
    let pending = 5;
    let broken = false;
    let reads = 0;
    const unwatch = watchConsumer('indexer', async () => {
      reads++;
      // Slow, like the broker: every gauge of one scrape must still show this one reading.
      await new Promise((r) => setTimeout(r, 20));
      if (broken) throw new Error('broker away');
      return { pending, ackPending: 2, redelivered: 1 };
    });
    const stop = watchDocumentStatuses(async () => ({ queued: 1, done: 4 }));
    expect(await sample('memstream_consumer_pending_messages', { consumer: 'indexer', service: 'extractor' })).toBe(5);
    expect(await sample('memstream_consumer_ack_pending_messages', { consumer: 'indexer' })).toBe(2);
    expect(await sample('memstream_documents', { status: 'done' })).toBe(4);
    expect(await sample('memstream_consumer_info_up')).toBe(1);
    await scrape(undefined, null);
    expect(reads).toBe(5);
    pending = 9;
    expect(await sample('memstream_consumer_pending_messages', { consumer: 'indexer' })).toBe(9);
    broken = true;
    expect(await sample('memstream_consumer_pending_messages', { consumer: 'indexer' })).toBeUndefined();
    expect(await sample('memstream_consumer_info_up')).toBe(0);
    unwatch();
    stop();
  });

  it('wants the token when MEMSTREAM_METRICS_TOKEN is set', async () => {
    expect((await bus.metrics(undefined)).status).toBe(401);
    expect((await bus.metrics('Bearer wrong')).status).toBe(401);
    const ok = await bus.metrics('Bearer s3cret');
    expect(ok.status).toBe(200);
    expect(ok.contentType).toContain('text/plain');
    expect(JSON.parse((await bus.metrics(undefined)).body)).toMatchObject({ error: 'Unauthorized' });
  });
});

describe('HTTP middleware', () => {
  let server: Server;
  let base: string;
  let published: string | undefined;
  let activeLog: { fields: unknown; log: Record<string, string> | undefined } | undefined;
  beforeAll(async () => {
    const mw = httpTelemetry();
    server = createServer((req, res) => {
      const r = Object.assign(req, { baseUrl: '', route: req.url?.startsWith('/v3/documents/') ? { path: '/v3/documents/:id' } : undefined });
      const s = Object.assign(res, { locals: {} as Record<string, unknown> });
      mw(r, s, () => {
        published = s.locals.traceparent as string | undefined;
        // Recorded spans: the log lines get the ids from the active span, not from separate fields.
        activeLog = { fields: requestTraceFields(s), log: logFields() };
        res.statusCode = req.url?.startsWith('/v3/') ? 200 : 404;
        res.end('{}');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const a = server.address();
    base = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('honours a valid traceparent: x-trace-id is its trace, the server span its child, the handlers publish that span', async () => {
    exporter.reset();
    const res = await fetch(`${base}/v3/documents/abc`, { headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' } });
    expect(res.headers.get('x-trace-id')).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    await new Promise((r) => setTimeout(r, 20));
    const span = (await finished()).find((s) => s.kind === SpanKind.SERVER)!;
    expect(span.name).toBe('GET /v3/documents/:id');
    expect(span.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    expect(published).toBe(`00-4bf92f3577b34da6a3ce929d0e0e4736-${span.spanContext().spanId}-01`);
    expect(activeLog).toEqual({ fields: undefined, log: { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: span.spanContext().spanId } });
  });

  it('starts a new trace for a missing or malformed traceparent, and labels by route pattern', async () => {
    const before = (await sample('memstream_http_request_duration_seconds_count', { method: 'GET', route: '/v3/documents/:id', status: '200' })) ?? 0;
    for (const tp of [undefined, 'garbage', '00-00000000000000000000000000000000-00f067aa0ba902b7-01']) {
      const res = await fetch(`${base}/v3/documents/${Math.random()}`, tp ? { headers: { traceparent: tp } } : {});
      const id = res.headers.get('x-trace-id');
      expect(id).toMatch(/^[\da-f]{32}$/);
      expect(id).not.toBe('00000000000000000000000000000000');
    }
    await fetch(`${base}/nowhere`);
    await new Promise((r) => setTimeout(r, 20));
    expect(await sample('memstream_http_request_duration_seconds_count', { method: 'GET', route: '/v3/documents/:id', status: '200' })).toBe(before + 3);
    expect(await sample('memstream_http_request_duration_seconds_count', { route: '(unmatched)', status: '404' })).toBe(1);
  });
});

describe('HTTP middleware without recorded spans', () => {
  let server: Server;
  let base: string;
  const seen: Array<{ published: string | undefined; fields: { traceId: string; spanId: string } | undefined; active: unknown; body: string }> = [];
  beforeAll(async () => {
    const mw = httpTelemetry({ recordSpans: false });
    // A body parser as body-parser is one: it calls on from the request stream's 'end' event.
    const parser = keepContext((req: import('node:http').IncomingMessage, _res: unknown, next: (err?: unknown) => void) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString('utf8')));
      req.on('end', () => {
        (req as unknown as { body: string }).body = body;
        next();
      });
    });
    server = createServer((req, res) => {
      const r = Object.assign(req, { baseUrl: '', route: { path: '/v3/documents' } });
      const s = Object.assign(res, { locals: {} as Record<string, unknown> });
      mw(r, s, () =>
        parser(req, res, () => {
          seen.push({ published: s.locals.traceparent as string | undefined, fields: requestTraceFields(s), active: logFields(), body: (req as unknown as { body: string }).body });
          res.end('{}');
        }),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const a = server.address();
    base = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('gives the request the ids a span would have, in x-trace-id, the published traceparent and the log fields, with no span and no context', async () => {
    const before = (await finished()).length;
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const res = await fetch(`${base}/v3/documents`, { method: 'POST', body: 'x'.repeat(100_000), headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` } });
    expect(res.headers.get('x-trace-id')).toBe(traceId);
    const got = seen.at(-1)!;
    expect(got.body.length).toBe(100_000);
    expect(got.published).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    expect(got.published).not.toContain('00f067aa0ba902b7');
    expect(got.fields).toEqual({ traceId, spanId: got.published!.split('-')[2] });
    // No AsyncLocalStorage in this mode: the log lines take the ids from requestTraceFields.
    expect(got.active).toBeUndefined();
    for (const tp of [undefined, 'garbage', '00-00000000000000000000000000000000-00f067aa0ba902b7-01', `00-${traceId}-0000000000000000-01`]) {
      const r = await fetch(`${base}/v3/documents`, { method: 'POST', body: '{}', ...(tp ? { headers: { traceparent: tp } } : {}) });
      const id = r.headers.get('x-trace-id');
      expect(id).toMatch(/^[\da-f]{32}$/);
      expect(id).not.toBe(traceId);
      expect(seen.at(-1)!.fields?.traceId).toBe(id);
    }
    // Every request its own trace.
    expect(new Set(seen.slice(-4).map((x) => x.fields?.traceId)).size).toBe(4);
    expect((await finished()).length).toBe(before);
  });
});
