// First: the OpenTelemetry SDK starts before any application module is loaded.
import { recordMemoryChanges, recordWebhookDelivery } from '@memstream/telemetry';
import { ensureMemoryEventsConsumer, lastEvent, startWorker } from '@memstream/bus';
import { STREAM_LIFECYCLE, lifecycleMemorySubject, lifecycleSubject, webhookDeliverySubject, type DocumentMetadataUpdated, type DocumentSubmitted, type WebhookDeliveryJob } from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import { loadConfig } from './config.js';
import { createTransitionHandler, mergeNote } from './handlers/transitions.js';
import { deliver } from './handlers/deliver.js';
import { keyedLimiter } from './handlers/serialize.js';
import { retryBudgetMs, type RetryPolicy } from './handlers/backoff.js';
import { httpSender } from './adapters/http-sender.js';
import { createMemoryAnnouncer } from './handlers/memory-events.js';
import { kvDeliveryRecords, kvDocNotes, kvKeyLifetimes, openBuckets, watchWebhooks } from './adapters/stores.js';
import { deadLetterDelivery, runDeliveries } from './adapters/delivery-consumer.js';
import { runMemoryEvents } from './adapters/memory-consumer.js';

const config = loadConfig();
const log = createLogger('notifier', { level: config.LOG_LEVEL });
const enc = new TextEncoder();

const policy: RetryPolicy = {
  maxAttempts: config.MEMSTREAM_WEBHOOK_MAX_ATTEMPTS,
  baseMs: config.MEMSTREAM_WEBHOOK_RETRY_BASE_MS,
  maxMs: config.MEMSTREAM_WEBHOOK_RETRY_MAX_MS,
};

await startWorker({
  consumer: 'notifier',
  natsUrl: config.NATS_URL,
  ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS,
  concurrency: config.NOTIFIER_CONCURRENCY,
  // The kinds it decodes are READERS.notifier.reads (packages/contracts/src/pipeline.ts): the transitions and the tag changes.
  log,
  setup: async (bus) => {
    const buckets = await openBuckets(bus);
    const registry = await watchWebhooks(buckets.webhooks, log);
    const records = kvDeliveryRecords(buckets.deliveries);
    const enqueue = async (job: WebhookDeliveryJob) => {
      await bus.js.publish(webhookDeliverySubject(job.webhookId), enc.encode(JSON.stringify(job)), { msgID: `${job.event.id}:${job.webhookId}` });
    };
    const handle = createTransitionHandler({
      notes: kvDocNotes(buckets.docs),
      async fromLog(documentId) {
        const sub = (await lastEvent(bus, documentId, 'submitted'))?.event as DocumentSubmitted | undefined;
        if (!sub) return null;
        const meta = (await lastEvent(bus, documentId, 'metadata-updated'))?.event as DocumentMetadataUpdated | undefined;
        const note = mergeNote(null, { customId: sub.data.customId, containerTags: sub.data.containerTags, tagsVersion: sub.data.metadataVersion, revision: sub.revision });
        return meta ? mergeNote(note, { containerTags: meta.data.containerTags, tagsVersion: meta.data.version }) : note;
      },
      webhooks: () => registry.list(),
      async publishLifecycle(event) {
        const ack = await bus.js.publish(lifecycleSubject(event.documentId), enc.encode(JSON.stringify(event)), { msgID: event.id });
        return ack.seq;
      },
      async purgeLifecycle(documentId, keepFromSeq) {
        await bus.jsm.streams.purge(STREAM_LIFECYCLE, { filter: lifecycleSubject(documentId), seq: keepFromSeq });
      },
      enqueue,
      now: () => new Date(),
    });
    // Memory commits of every writer (memorizer, gateway) → memory events on LIFECYCLE and to webhooks, and /metrics.
    await ensureMemoryEventsConsumer(bus.jsm);
    const memoryEvents = runMemoryEvents({
      bus,
      log,
      concurrency: config.NOTIFIER_CONCURRENCY,
      announce: createMemoryAnnouncer({
        webhooks: () => registry.list(),
        async publishLifecycle(event) {
          const ack = await bus.js.publish(lifecycleMemorySubject(event.containerTag), enc.encode(JSON.stringify(event)), { msgID: event.id });
          return { seq: ack.seq, duplicate: ack.duplicate };
        },
        attempted: (webhookId, eventId) => records.exists(webhookId, eventId),
        enqueue,
        count: recordMemoryChanges,
        now: () => new Date(),
      }),
    });
    // One receiver host (a tenant's slow or flooded endpoint) holds at most MEMSTREAM_WEBHOOK_HOST_CONCURRENCY POSTs at once.
    const perHost = keyedLimiter(config.MEMSTREAM_WEBHOOK_HOST_CONCURRENCY);
    const post = httpSender({
      allowPrivate: config.MEMSTREAM_WEBHOOK_ALLOW_PRIVATE,
      timeoutMs: config.MEMSTREAM_WEBHOOK_TIMEOUT_MS,
      onRefused: (host, detail) => log.warn({ host, detail }, 'webhook receiver refused by the address policy'),
    });
    const send: typeof post = (req) => perHost(new URL(req.url).host, () => post(req));
    const deliveries = runDeliveries({
      bus,
      log,
      concurrency: config.MEMSTREAM_WEBHOOK_CONCURRENCY,
      onOutcome: recordWebhookDelivery,
      handle: (job, attempt) =>
        deliver(
          job,
          attempt,
          {
            webhook: (id) => registry.get(id),
            key: kvKeyLifetimes(buckets.keys),
            send,
            record: (d) => records.put(d),
            deadLetter: (j, d) => deadLetterDelivery(bus, j, d),
            now: () => new Date(),
          },
          policy,
        ),
    });
    log.info(
      { webhooks: registry.list().length, maxAttempts: policy.maxAttempts, retryBudgetMs: retryBudgetMs(policy), allowPrivate: config.MEMSTREAM_WEBHOOK_ALLOW_PRIVATE },
      'webhook deliveries running',
    );
    return {
      handle,
      stopConsuming: async () => {
        await Promise.all([deliveries.stop(), memoryEvents.stop()]);
      },
      close: () => registry.stop(),
      ready: async () => {
        await buckets.webhooks.status();
      },
    };
  },
});
