import { storageReplicas } from '@memstream/kit';
import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, type JetStreamManager, type StreamConfig } from '@nats-io/jetstream';
import {
  CONSUMERS,
  DEAD_LETTER_SUBJECTS,
  DOC_SUBJECTS,
  LIFECYCLE_SUBJECTS,
  STREAM_DEAD_LETTERS,
  STREAM_DOCS,
  STREAM_LIFECYCLE,
  STREAM_MEMORY,
  MEMORY_SUBJECTS,
  MEMORY_EVENTS_CONSUMER,
  STREAM_WEBHOOK_DELIVERIES,
  WEBHOOK_DELIVERY_CONSUMER,
  WEBHOOK_DELIVERY_SUBJECTS,
  CONSUMER_NAMES,
  RETIRED_DURABLES,
  type ConsumerName,
  type ConsumerPolicy,
} from '@memstream/contracts';

export type { ConsumerPolicy } from '@memstream/contracts';

/** Each consumer's delivery settings, from the pipeline table (packages/contracts/src/pipeline.ts). */
export const DEFAULT_POLICIES = Object.fromEntries(CONSUMER_NAMES.map((n) => [n, CONSUMERS[n].policy])) as Record<ConsumerName, ConsumerPolicy>;

export interface TopologyOptions {
  /** JetStream replicas of each stream: 1 on one machine, 3 in a production cluster. */
  replicas?: number;
  /** Server-side deduplication window for Nats-Msg-Id. */
  duplicateWindowMs?: number;
}

/**
 * The DOCS stream is the source of truth: file storage, limits retention (events are kept, not
 * consumed away), deduplication by Nats-Msg-Id, and no age limit. DEAD_LETTERS keeps copies of
 * messages that could not be processed, for inspection and replay.
 */
export function docsStreamConfig(opts: TopologyOptions = {}): Partial<StreamConfig> & { name: string } {
  return {
    name: STREAM_DOCS,
    subjects: [DOC_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    num_replicas: opts.replicas ?? storageReplicas(),
    duplicate_window: (opts.duplicateWindowMs ?? 120_000) * 1_000_000,
    max_msg_size: 1024 * 1024,
    allow_direct: true,
    // Deleting a document purges its subject tree: the API must allow it.
    deny_purge: false,
    deny_delete: false,
  };
}

/**
 * The MEMORY stream: the log of memory commits, one subject per container tag, kept like DOCS
 * (file storage, no age limit, deduplication by commit id).
 */
export function memoryStreamConfig(replicas = storageReplicas()): Partial<StreamConfig> & { name: string } {
  return {
    name: STREAM_MEMORY,
    subjects: [MEMORY_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    num_replicas: replicas,
    duplicate_window: 120_000 * 1_000_000,
    max_msg_size: 1024 * 1024,
    allow_direct: true,
  };
}

/** Create the MEMORY stream if it does not exist (never changes one that does). Idempotent. */
export async function ensureMemoryStreamExists(jsm: JetStreamManager, replicas = storageReplicas()): Promise<void> {
  try {
    await jsm.streams.info(STREAM_MEMORY);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    try {
      await jsm.streams.add(memoryStreamConfig(replicas));
    } catch (e) {
      if (!/already in use/i.test(String(e))) throw e;
    }
  }
}

/**
 * The notifier's durable consumer of MEMORY: it turns commits into memory events. Like its
 * consumer of DOCS it starts at the end of the log when first created, so installing it on an
 * existing log (or rebuilding a memory store from the log) announces nothing old.
 */
export async function ensureMemoryEventsConsumer(jsm: JetStreamManager, replicas = storageReplicas()): Promise<void> {
  await ensureMemoryStreamExists(jsm, replicas);
  try {
    await jsm.consumers.info(STREAM_MEMORY, MEMORY_EVENTS_CONSUMER);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await addConsumer(jsm, STREAM_MEMORY, {
      durable_name: MEMORY_EVENTS_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.New,
      filter_subject: MEMORY_SUBJECTS,
      ack_wait: 30_000 * 1_000_000,
      max_deliver: -1,
      max_ack_pending: 1_000,
      inactive_threshold: 0,
    });
  }
}

async function ensureStream(jsm: JetStreamManager, cfg: Partial<StreamConfig> & { name: string }): Promise<void> {
  try {
    await jsm.streams.info(cfg.name);
    await jsm.streams.update(cfg.name, cfg);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    try {
      await jsm.streams.add(cfg);
    } catch (e) {
      // Another process created it between our info and add.
      if (!/already in use/i.test(String(e))) throw e;
    }
  }
}

function isNotFound(err: unknown): boolean {
  return /not found/i.test(String((err as Error)?.message ?? err));
}

/** Create or update the streams and every durable consumer. Idempotent; every service calls it at start. */
export async function ensureTopology(jsm: JetStreamManager, opts: TopologyOptions & { ackWaitMs?: number | undefined } = {}): Promise<void> {
  await ensureStream(jsm, docsStreamConfig(opts));
  await ensureStream(jsm, {
    name: STREAM_DEAD_LETTERS,
    subjects: [DEAD_LETTER_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    num_replicas: opts.replicas ?? storageReplicas(),
  });
  for (const name of CONSUMER_NAMES) {
    await ensureConsumer(jsm, name, { ...DEFAULT_POLICIES[name], ...(opts.ackWaitMs ? { ackWaitMs: opts.ackWaitMs } : {}) });
  }
  // A store made when every stage had two lanes still has the later stages' bulk durables: nothing
  // reads them any more, and messages would pile up on them as pending.
  for (const d of RETIRED_DURABLES) {
    try {
      await jsm.consumers.delete(STREAM_DOCS, d);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
  await ensureWebhookTopology(jsm, opts);
}

/**
 * Outbound lifecycle events. LIFECYCLE keeps a day of transitions (the resume window of
 * GET /v3/events). WEBHOOK_DELIVERIES is a work queue: a delivery leaves it when it is acked
 * (delivered, or failed for good and copied to DEAD_LETTERS). Its consumer redelivers without a
 * server-side limit because the notifier enforces the retry budget (MEMSTREAM_WEBHOOK_MAX_ATTEMPTS)
 * itself, so that setting lives in one service's environment instead of every process's topology.
 * max_ack_pending is high because a delivery waiting for its backoff counts as pending: one dead
 * receiver must not hold up the others.
 */
export async function ensureWebhookTopology(jsm: JetStreamManager, opts: TopologyOptions = {}): Promise<void> {
  const dedupe = 10 * 60_000 * 1_000_000;
  await ensureStream(jsm, {
    name: STREAM_LIFECYCLE,
    subjects: [LIFECYCLE_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_age: 24 * 3600_000 * 1_000_000,
    num_replicas: opts.replicas ?? storageReplicas(),
    duplicate_window: dedupe,
    deny_purge: false,
  });
  await ensureStream(jsm, {
    name: STREAM_WEBHOOK_DELIVERIES,
    subjects: [WEBHOOK_DELIVERY_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Workqueue,
    num_replicas: opts.replicas ?? storageReplicas(),
    duplicate_window: dedupe,
    deny_purge: false,
  });
  try {
    await jsm.consumers.info(STREAM_WEBHOOK_DELIVERIES, WEBHOOK_DELIVERY_CONSUMER);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await addConsumer(jsm, STREAM_WEBHOOK_DELIVERIES, {
      durable_name: WEBHOOK_DELIVERY_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subject: WEBHOOK_DELIVERY_SUBJECTS,
      // A POST times out after 10 s; the pull loop also calls working() while one runs.
      ack_wait: 60_000 * 1_000_000,
      max_deliver: -1,
      max_ack_pending: 20_000,
      inactive_threshold: 0,
    });
  }
}

/** Add a durable consumer; another process adding the same one at the same moment is not an error. */
async function addConsumer(jsm: JetStreamManager, stream: string, cfg: Parameters<JetStreamManager['consumers']['add']>[1]): Promise<void> {
  try {
    await jsm.consumers.add(stream, cfg);
  } catch (e) {
    if (!/already in use|already exists/i.test(String(e))) throw e;
  }
}

/**
 * Create or update a consumer's durable, and a stage's bulk-lane durable beside it (the same
 * filter and policy: each reads every message of its kind and acks the other lane's unread).
 */
export async function ensureConsumer(jsm: JetStreamManager, name: ConsumerName, policy: ConsumerPolicy): Promise<void> {
  const { durable, bulkDurable, filter } = CONSUMERS[name];
  for (const d of bulkDurable ? [durable, bulkDurable] : [durable]) {
    const cfg = {
      durable_name: d,
      ack_policy: AckPolicy.Explicit,
      // The notifier announces what happens from now on, never the history already in the log.
      // A bulk-lane durable added to a log that has history reads it all, acking it unread (none of it is bulk).
      deliver_policy: CONSUMERS[name].startAt === 'new' ? DeliverPolicy.New : DeliverPolicy.All,
      filter_subject: filter,
      ack_wait: policy.ackWaitMs * 1_000_000,
      max_deliver: policy.maxDeliver,
      max_ack_pending: policy.maxAckPending,
      inactive_threshold: 0,
    };
    try {
      await jsm.consumers.info(STREAM_DOCS, d);
      await jsm.consumers.update(STREAM_DOCS, d, {
        ack_wait: cfg.ack_wait,
        max_deliver: cfg.max_deliver,
        max_ack_pending: cfg.max_ack_pending,
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await addConsumer(jsm, STREAM_DOCS, cfg);
    }
  }
}
