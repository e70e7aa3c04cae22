/** Names shared by every process that touches the broker. Changing one is a migration. */

export const STREAM_DOCS = 'DOCS';
export const STREAM_DEAD_LETTERS = 'DEAD_LETTERS';
export const BLOB_BUCKET = 'memstream-blobs';

/** Every document event lives under doc.<documentId>.<kind>, so one document's history can be purged. */
export const DOC_SUBJECTS = 'doc.>';
export const DEAD_LETTER_SUBJECTS = 'dead.>';

export const EVENT_KINDS = [
  'submitted',
  'stage-started',
  'extracted',
  'chunked',
  'embedded',
  'indexed',
  'failed',
  'metadata-updated',
  'deleted',
] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

export function docSubject(documentId: string, kind: EventKind): string {
  return `doc.${documentId}.${kind}`;
}

export function deadLetterSubject(consumer: string, documentId: string): string {
  return `dead.${consumer}.${documentId}`;
}

/**
 * The lane of a submission (docs/pipeline.md, "Fairness"): a message header, not a subject
 * token, so every subject, last-by-subject read and optimistic-concurrency check is unchanged.
 * `bulk` marks the work of a tag with a backlog (and re-drives); its absence means `normal`.
 * The entrance reads its input through one durable consumer per lane, and the stages' later events
 * keep the lane of the event they follow.
 */
export const LANE_HEADER = 'Memstream-Lane';
export const LANES = ['normal', 'bulk'] as const;
export type Lane = (typeof LANES)[number];

/**
 * The document's taskType, as a header on its submission (set by publishEvent) and on every
 * stage event that follows it (the runner carries it): a hint that lets a reader of some task
 * types only (the memorizer: memory) ack the others unread, without decoding them or reading the
 * log. A message without it (written before the header existed) is decoded and decided as before.
 */
export const TASK_TYPE_HEADER = 'Memstream-Task-Type';

/** The durable consumers (CONSUMERS, ConsumerName) are derived from the pipeline table in pipeline.ts. */

/** Events over this many bytes of JSON travel by claim check through the Object Store. */
export const CLAIM_CHECK_BYTES = 256 * 1024;

/** Document ids must be one NATS subject token. */
export const DOCUMENT_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Outbound lifecycle events (services/notifier). LIFECYCLE holds every transition with the
 * document's tags resolved, for GET /v3/events; WEBHOOK_DELIVERIES is the work queue of
 * (event, webhook) deliveries, one subject per webhook.
 */
export const STREAM_LIFECYCLE = 'LIFECYCLE';
export const LIFECYCLE_SUBJECTS = 'lifecycle.>';
export function lifecycleSubject(documentId: string): string {
  return `lifecycle.${documentId}`;
}
/** A container tag's memory events in LIFECYCLE: two tokens, so never a document's subject (and never purged with one). */
export function lifecycleMemorySubject(containerTag: string): string {
  return `lifecycle.mem.${Buffer.from(containerTag).toString('base64url')}`;
}
export const STREAM_WEBHOOK_DELIVERIES = 'WEBHOOK_DELIVERIES';
export const WEBHOOK_DELIVERY_SUBJECTS = 'hook.>';
export function webhookDeliverySubject(webhookId: string): string {
  return `hook.${webhookId}`;
}
/** The durable pull consumer that POSTs deliveries (on WEBHOOK_DELIVERIES, not DOCS). */
export const WEBHOOK_DELIVERY_CONSUMER = 'notifier-deliveries';
/** The notifier's durable consumer of MEMORY (memory commits → memory events). */
export const MEMORY_EVENTS_CONSUMER = 'notifier-memory';
/** Registrations, secrets included. */
export const WEBHOOKS_BUCKET = 'memstream-webhooks';
/** The state of each delivery after its latest attempt, kept for WEBHOOK_DELIVERY_RECORD_TTL_MS. */
export const WEBHOOK_DELIVERIES_BUCKET = 'memstream-webhook-deliveries';
export const WEBHOOK_DELIVERY_RECORD_TTL_MS = 7 * 24 * 3600_000;
/** The notifier's note of each document's tags and customId, which a deletion's tombstone no longer has in the log. */
export const NOTIFIER_DOCS_BUCKET = 'memstream-notifier-docs';
