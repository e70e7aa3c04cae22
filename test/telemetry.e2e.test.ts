import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { valueIn } from './support/metrics.js';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

/** One span as the OTLP/HTTP JSON exporter sends it, with its process's service.name. */
interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

interface OtlpAttr {
  key: string;
  value: { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
}
interface OtlpRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: OtlpAttr[] };
    scopeSpans?: Array<{ spans?: Array<{ traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: OtlpAttr[] }> }>;
  }>;
}

const attrs = (list: OtlpAttr[] = []) => Object.fromEntries(list.map((a) => [a.key, a.value.stringValue ?? a.value.intValue ?? a.value.boolValue ?? a.value.doubleValue]));

/** A collector on loopback: what the services' real OTLP exporter (http/json) posts to /v1/traces. */
async function startCollector(): Promise<{ url: string; spans: ReceivedSpan[]; close(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpRequest;
        for (const rs of body.resourceSpans ?? []) {
          const service = String(attrs(rs.resource?.attributes)['service.name']);
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
              spans.push({ service, traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId ?? '', name: s.name, kind: s.kind, attributes: attrs(s.attributes) });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const a = server.address();
  return {
    url: `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`,
    spans,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/plain');
  return res.text();
}

const WORKERS = ['extractor', 'chunker', 'embedder', 'indexer', 'projection'] as const;

/**
 * Operating memstream: one document's trace through all six services, exported by the real
 * OTLP exporter to a collector on loopback; the metrics moving during ingest; the probes.
 */
describe('telemetry: traces, metrics and health across the services', () => {
  let stack: TestStack;
  let collector: Awaited<ReturnType<typeof startCollector>>;
  const ops = (name: (typeof WORKERS)[number]) => stack.procs.get(name)!.opsUrl!;

  beforeAll(async () => {
    collector = await startCollector();
    // One process per service, as in Kubernetes, where traces are exported: each process is one
    // OTel service (memstream-<service>). Under ./memstream up's worker hosts a span's service is its
    // host's (memstream-stages, memstream-stores) and its consumer names the worker: hosts.e2e.test.ts.
    stack = await startTestStack({
      layout: 'per-service',
      env: {
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_BSP_SCHEDULE_DELAY: '100',
        // The runner's per-message lines are debug: they show that every line carries the trace id.
        LOG_LEVEL: 'debug',
      },
    });
  }, 120_000);

  afterAll(async () => {
    await stack?.teardown();
    await collector?.close();
  });

  it('follows one document in one trace from the HTTP request through every stage to the projection', async () => {
    const client = api(stack);
    const traceId = randomBytes(16).toString('hex');
    const callerSpan = randomBytes(8).toString('hex');
    const added = await client.call('POST', '/v3/documents', { content: 'A trace follows this document through every stage.' }, { traceparent: `00-${traceId}-${callerSpan}-01` });
    expect(added.status).toBe(200);
    // The caller's traceparent is honoured: the response names its trace.
    expect(added.headers.get('x-trace-id')).toBe(traceId);
    const id = added.body.id as string;
    await waitFor(`document ${id} done`, async () => ((await client.get(id)).body?.status === 'done' ? true : undefined), 30_000);

    // The projection's span for `indexed` is the last one; wait until it (and the rest) arrived.
    const ofDoc = () => collector.spans.filter((s) => s.attributes['memstream.document.id'] === id || s.traceId === traceId);
    const six = ['gateway', ...WORKERS].map((s) => `memstream-${s}`);
    await waitFor(
      'spans from all six services, the projection of indexed included',
      async () => {
        const got = ofDoc();
        const ids = new Set(got.map((s) => s.spanId));
        // Each process exports in its own batches: wait until no span's parent is still on its way.
        const dangling = got.filter((s) => !ids.has(s.parentSpanId) && s.parentSpanId !== callerSpan);
        return got.some((s) => s.service === 'memstream-projection' && s.name === 'process indexed') && six.every((n) => got.some((s) => s.service === n)) && dangling.length === 0
          ? true
          : undefined;
      },
      15_000,
    );
    const spans = ofDoc();
    // Every span of the document, in every service, is in the caller's trace.
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([traceId]));
    expect([...new Set(spans.map((s) => s.service))]).toEqual(expect.arrayContaining(six));
    // Parent links chain: every span's parent is a span of the trace, except the root, whose parent is the caller.
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const roots = spans.filter((s) => !byId.has(s.parentSpanId));
    expect(roots.map((s) => [s.service, s.name, s.parentSpanId])).toEqual([['memstream-gateway', 'POST /v3/documents', callerSpan]]);
    // From the projection's last span back to the request: projection ← indexer ← embedder ← chunker ← extractor ← gateway.
    const path: string[] = [];
    for (let s = spans.find((x) => x.service === 'memstream-projection' && x.name === 'process indexed'); s; s = byId.get(s.parentSpanId)) {
      path.push(`${s.service.replace('memstream-', '')}: ${s.name}`);
    }
    expect(path).toEqual([
      'projection: process indexed',
      'indexer: publish document.indexed.v1',
      'indexer: process embedded',
      'embedder: publish document.embedded.v1',
      'embedder: process chunked',
      'chunker: publish document.chunked.v1',
      'chunker: process extracted',
      'extractor: publish document.extracted.v1',
      'extractor: process submitted',
      'gateway: publish document.submitted.v1',
      'gateway: POST /v3/documents',
    ]);
    // The projection applied every status change of the document inside the same trace.
    const projected = spans.filter((s) => s.service === 'memstream-projection').map((s) => s.name);
    expect(projected).toEqual(expect.arrayContaining(['process submitted', 'process stage-started', 'process extracted', 'process indexed']));
    // And the trace id is in the log lines of all six services.
    for (const service of ['gateway', ...WORKERS]) {
      expect(stack.logs.some((l) => l.startsWith(`${service} `) && l.includes(`"traceId":"${traceId}"`)), `${service} logs the trace id`).toBe(true);
    }
  });

  it('serves /metrics on the gateway and on every worker, and the counts move during ingest', async () => {
    const client = api(stack);
    const [gw0, chunker0, projection0] = await Promise.all([scrape(stack.baseUrl), scrape(ops('chunker')), scrape(ops('projection'))]);
    const N = 4;
    const ids: string[] = [];
    for (let i = 0; i < N; i++) {
      const r = await client.add(`Metrics document ${i}: ${randomBytes(6).toString('hex')}`);
      expect(r.status).toBe(200);
      ids.push(r.body.id);
    }
    // Scrape while the documents go through: the projection's done count climbs to N more.
    const doneBefore = valueIn(projection0, 'memstream_documents', { status: 'done' });
    const seen: number[] = [];
    await waitFor(
      'the done gauge to rise by N',
      async () => {
        const done = valueIn(await scrape(ops('projection')), 'memstream_documents', { status: 'done' });
        seen.push(done);
        return done >= doneBefore + N ? done : undefined;
      },
      30_000,
      100,
    );
    // Never backwards while scraped during ingest.
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    for (const id of ids) expect((await client.get(id)).body.status).toBe('done');

    const [gw1, chunker1, projection1] = await Promise.all([scrape(stack.baseUrl), scrape(ops('chunker')), scrape(ops('projection'))]);
    const moved = (before: string, after: string, name: string, labels: Record<string, string>) => valueIn(after, name, labels) - valueIn(before, name, labels);
    // Gateway: the HTTP histogram by route pattern, and the submitted events it published.
    expect(moved(gw0, gw1, 'memstream_http_request_duration_seconds_count', { method: 'POST', route: '/v3/documents', status: '200' })).toBe(N);
    expect(moved(gw0, gw1, 'memstream_events_published_total', { event: 'document.submitted.v1' })).toBe(N);
    // A worker: events handled and its stage histogram.
    expect(moved(chunker0, chunker1, 'memstream_events_total', { stage: 'chunker', event: 'extracted', outcome: 'handled' })).toBe(N);
    expect(moved(chunker0, chunker1, 'memstream_stage_duration_seconds_count', { stage: 'chunker', outcome: 'handled' })).toBe(N);
    expect(moved(chunker0, chunker1, 'memstream_events_published_total', { event: 'document.chunked.v1' })).toBe(N);
    // The projection: documents by status, and the events it applied.
    expect(moved(projection0, projection1, 'memstream_documents', { status: 'done' })).toBe(N);
    expect(moved(projection0, projection1, 'memstream_events_total', { stage: 'projection', event: 'indexed', outcome: 'handled' })).toBe(N);
    // Consumer backlogs come from the server: everything consumed and acked.
    expect(chunker1).toMatch(/^memstream_consumer_pending_messages\{[^}]*consumer="chunker"[^}]*\} 0$/m);
    expect(valueIn(chunker1, 'memstream_consumer_ack_pending_messages', { consumer: 'chunker' })).toBe(0);
    expect(valueIn(chunker1, 'memstream_consumer_info_up')).toBe(1);
    // Default process metrics, labelled by service.
    expect(valueIn(chunker1, 'process_resident_memory_bytes', { service: 'chunker' })).toBeGreaterThan(0);
    expect(gw1).not.toContain('memstream_consumer_info_up');
    // Every worker serves its metrics.
    for (const w of WORKERS) expect(valueIn(await scrape(ops(w)), 'nodejs_eventloop_lag_seconds', { service: w })).toBeGreaterThanOrEqual(0);
  });

  it('answers /healthz and /readyz on every service; /readyz turns 503 while the broker is away', async () => {
    const urls = [stack.baseUrl, ...WORKERS.map(ops)];
    for (const u of urls) {
      expect((await fetch(`${u}/healthz`)).status).toBe(200);
      expect((await fetch(`${u}/readyz`)).status).toBe(200);
    }
    expect((await fetch(`${ops('chunker')}/nothing`)).status).toBe(404);

    await stack.nats.stop();
    try {
      await Promise.all(
        urls.map(async (u) => {
          const r = await fetch(`${u}/readyz`);
          expect(r.status, `${u}/readyz with the broker away`).toBe(503);
          expect(await r.json()).toMatchObject({ error: 'Not ready' });
          // Alive all the same: no restart would help.
          expect((await fetch(`${u}/healthz`)).status).toBe(200);
        }),
      );
    } finally {
      await stack.nats.restart();
    }
    // Back once the broker is (the clients reconnect on their own).
    await Promise.all(urls.map((u) => waitFor(`${u}/readyz ready again`, async () => ((await fetch(`${u}/readyz`)).status === 200 ? true : undefined), 20_000, 100)));
  }, 60_000);
});
