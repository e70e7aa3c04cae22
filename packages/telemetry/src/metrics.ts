import { timingSafeEqual } from 'node:crypto';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * This process's Prometheus metrics. Names and labels are listed in docs/observability.md;
 * every series also carries `service` (gateway, extractor, ...).
 */
export const registry = new Registry();

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export const stageDuration = new Histogram({
  name: 'memstream_stage_duration_seconds',
  help: 'Time one consumer spends on one message, from delivery to ack or nak, by stage (consumer) and outcome.',
  labelNames: ['stage', 'outcome'] as const,
  buckets: SECONDS,
  registers: [registry],
});

export const eventsTotal = new Counter({
  name: 'memstream_events_total',
  help: 'Messages a consumer disposed of, by stage (consumer), event kind and outcome (handled, skipped-stale, retried, failed, dead-lettered).',
  labelNames: ['stage', 'event', 'outcome'] as const,
  registers: [registry],
});

export const eventFailures = new Counter({
  name: 'memstream_event_failures_total',
  help: 'Messages that ended a document as failed or went to the dead-letter stream, by stage and failure class (permanent, poison, exhausted, undecodable).',
  labelNames: ['stage', 'class'] as const,
  registers: [registry],
});

export const eventsPublished = new Counter({
  name: 'memstream_events_published_total',
  help: 'Events this process published to the log, by event type.',
  labelNames: ['event'] as const,
  registers: [registry],
});

export const httpDuration = new Histogram({
  name: 'memstream_http_request_duration_seconds',
  help: 'HTTP requests the gateway answered, by method, route pattern and status code.',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: SECONDS,
  registers: [registry],
});

export const webhookDeliveries = new Counter({
  name: 'memstream_webhook_deliveries_total',
  help: 'Webhook delivery attempts the notifier finished, by result: delivered (2xx), retrying (to be tried again after a backoff), failed (attempts used up or address refused: recorded and dead-lettered), dropped (the webhook was deleted), error (the attempt could not be recorded; it comes back).',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const webhookDeliveryDuration = new Histogram({
  name: 'memstream_webhook_delivery_duration_seconds',
  help: 'Time of one webhook delivery attempt, from taking the message to ack or nak, including the POST.',
  buckets: SECONDS,
  registers: [registry],
});

export const memoryChanges = new Counter({
  name: 'memstream_memories_total',
  help: 'Memory changes committed to the MEMORY log by any writer (memorizer, gateway direct writes, updates and forgets), by container tag and change (created, updated: a new version, forgotten); counted once, by the notifier.',
  labelNames: ['tag', 'change'] as const,
  registers: [registry],
});

export const memoryExtractionSeconds = new Counter({
  name: 'memstream_memory_extraction_seconds_total',
  help: 'Time the memory extractor spent, by container tag (divide by memstream_memory_extractions_total for the mean).',
  labelNames: ['tag'] as const,
  registers: [registry],
});

export const memoryExtractions = new Counter({
  name: 'memstream_memory_extractions_total',
  help: 'Documents the memory extractor read, by container tag.',
  labelNames: ['tag'] as const,
  registers: [registry],
});

export const memoryExtractionTokens = new Counter({
  name: 'memstream_memory_extraction_tokens_total',
  help: 'Tokens a model-backed memory extractor used, by container tag (0 for the offline extractor).',
  labelNames: ['tag'] as const,
  registers: [registry],
});

export const memoryExtractionDuration = new Histogram({
  name: 'memstream_memory_extraction_duration_seconds',
  help: 'Time of one extraction (one document, one container tag).',
  buckets: SECONDS,
  registers: [registry],
});

/**
 * What one memorizer extraction cost, for the extraction metrics. The memories it made are counted
 * by the notifier (recordMemoryChanges), which sees every writer's commits once.
 */
export function recordMemorized(s: { containerTag: string; tokens: number; ms: number }): void {
  const tag = s.containerTag;
  memoryExtractions.inc({ tag });
  memoryExtractionSeconds.inc({ tag }, s.ms / 1000);
  memoryExtractionTokens.inc({ tag }, s.tokens);
  memoryExtractionDuration.observe(s.ms / 1000);
}

/** Memories made, updated and forgotten in one commit (the notifier, once per commit of the MEMORY log). */
export function recordMemoryChanges(containerTag: string, c: { created: number; updated: number; forgotten: number }): void {
  if (c.created) memoryChanges.inc({ tag: containerTag, change: 'created' }, c.created);
  if (c.updated) memoryChanges.inc({ tag: containerTag, change: 'updated' }, c.updated);
  if (c.forgotten) memoryChanges.inc({ tag: containerTag, change: 'forgotten' }, c.forgotten);
}

/** One finished delivery attempt, for the two webhook metrics. */
export function recordWebhookDelivery(result: 'delivered' | 'retrying' | 'failed' | 'dropped' | 'error', ms: number): void {
  webhookDeliveries.inc({ result });
  webhookDeliveryDuration.observe(ms / 1000);
}

export interface Backlog {
  pending: number;
  ackPending: number;
  redelivered: number;
}

const consumers = new Map<string, () => Promise<Backlog>>();
let documentCounts: (() => Promise<Record<string, number>>) | null = null;

type Reading = Array<[consumer: string, backlog: Backlog | null]>;
let reading: Promise<Reading> | null = null;

/**
 * The server's view of every watched consumer, read once per scrape: prom-client collects all
 * metrics of a scrape at once (each gauge's collect starts in the same tick), so the first
 * gauge's collect starts the reads and the others share them; the next scrape reads again.
 */
function readBacklogs(): Promise<Reading> {
  reading ??= Promise.all(
    [...consumers].map(async ([name, read]): Promise<[string, Backlog | null]> => {
      try {
        return [name, await read()];
      } catch {
        return [name, null];
      }
    }),
  ).finally(() => {
    reading = null;
  });
  return reading;
}

function backlogGauge(name: string, help: string, pick: (b: Backlog) => number, registers: Registry[]): Gauge<'consumer'> {
  return new Gauge({
    name,
    help,
    labelNames: ['consumer'] as const,
    registers,
    async collect() {
      for (const [consumer, b] of await readBacklogs()) {
        // A consumer the broker could not tell about has no value rather than a stale one.
        if (b) this.set({ consumer }, pick(b));
        else this.remove({ consumer });
      }
    },
  });
}

const backlogGauges = [
  backlogGauge('memstream_consumer_pending_messages', "Messages matching a durable consumer's filter not yet delivered (the lag), read from the server at scrape time.", (b) => b.pending, [registry]),
  backlogGauge('memstream_consumer_ack_pending_messages', 'Messages delivered to a durable consumer and not yet acked, read from the server at scrape time.', (b) => b.ackPending, [registry]),
  backlogGauge('memstream_consumer_redelivered_messages', 'Messages of a durable consumer delivered more than once and not yet acked, read from the server at scrape time.', (b) => b.redelivered, [registry]),
];

// Registered with the first watched consumer: a process with none (the gateway) shows no such series.
const consumerInfoUp = new Gauge({
  name: 'memstream_consumer_info_up',
  help: "1 when the last scrape could read every watched consumer's state from the broker, 0 when it could not (those gauges are then absent).",
  registers: [],
  async collect() {
    const r = await readBacklogs();
    this.set(r.every(([, b]) => b !== null) ? 1 : 0);
  },
});

const documentsGauge = new Gauge({
  name: 'memstream_documents',
  help: 'Documents in the view store by status, counted at scrape time (served by the projection).',
  labelNames: ['status'] as const,
  registers: [registry],
  async collect() {
    if (!documentCounts) return;
    try {
      const counts = await documentCounts();
      for (const [status, n] of Object.entries(counts)) this.set({ status }, n);
    } catch {
      // The store is away: no numbers rather than stale ones (/readyz says why).
      this.reset();
    }
  },
});
void documentsGauge;

/** Report a consumer's backlog on every scrape; returns the function that stops it. */
export function watchConsumer(consumer: string, read: () => Promise<Backlog>): () => void {
  consumers.set(consumer, read);
  if (!registry.getSingleMetric('memstream_consumer_info_up')) registry.registerMetric(consumerInfoUp);
  return () => {
    if (consumers.get(consumer) !== read) return;
    consumers.delete(consumer);
    for (const g of backlogGauges) g.remove({ consumer });
  };
}

/** Report documents by status on every scrape (the view store's count, e.g. DocumentViews.countByStatus). */
export function watchDocumentStatuses(count: () => Promise<Record<string, number>>): () => void {
  documentCounts = count;
  return () => {
    if (documentCounts === count) documentCounts = null;
  };
}

/** One consumer outcome into the counters and the stage histogram. */
export function recordOutcome(o: { stage: string; event: string; outcome: string; failureClass?: string | undefined; seconds: number }): void {
  stageDuration.observe({ stage: o.stage, outcome: o.outcome }, o.seconds);
  eventsTotal.inc({ stage: o.stage, event: o.event, outcome: o.outcome });
  if (o.failureClass) eventFailures.inc({ stage: o.stage, class: o.failureClass });
}

let defaultsOn = false;

/** Set the `service` label and start the process metrics (CPU, memory, event loop lag, GC). */
export function initMetrics(service: string): void {
  registry.setDefaultLabels({ service });
  if (defaultsOn) return;
  defaultsOn = true;
  collectDefaultMetrics({ register: registry });
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * The exposition for one scrape. Without MEMSTREAM_METRICS_TOKEN it is open (the ops port is
 * for the cluster's scraper); with one, a scrape must send `Authorization: Bearer <token>`.
 */
export async function scrape(authorization: string | undefined, token: string | null): Promise<{ status: number; contentType: string; body: string }> {
  if (token !== null) {
    const given = /^Bearer\s+(.+)$/i.exec(authorization ?? '')?.[1]?.trim() ?? '';
    if (!sameSecret(given, token)) {
      return {
        status: 401,
        contentType: 'application/json; charset=utf-8',
        body: JSON.stringify({ error: 'Unauthorized', details: 'metrics need Authorization: Bearer <MEMSTREAM_METRICS_TOKEN>' }),
      };
    }
  }
  return { status: 200, contentType: registry.contentType, body: await registry.metrics() };
}
