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

/** One durable pull consumer per service; replicas of a service share it (work-queue style). */
export const CONSUMERS = {
  extractor: { durable: 'extractor', filter: 'doc.*.submitted' },
  chunker: { durable: 'chunker', filter: 'doc.*.extracted' },
  embedder: { durable: 'embedder', filter: 'doc.*.chunked' },
  indexer: { durable: 'indexer', filter: 'doc.*.embedded' },
  /** nats-server 2.9 allows one filter subject per consumer: the indexer's second consumer follows tag and metadata changes. */
  indexerMeta: { durable: 'indexer-meta', filter: 'doc.*.metadata-updated' },
  projection: { durable: 'projection', filter: 'doc.>' },
} as const;
export type ConsumerName = keyof typeof CONSUMERS;

/** Events over this many bytes of JSON travel by claim check through the Object Store. */
export const CLAIM_CHECK_BYTES = 256 * 1024;

/** Document ids must be one NATS subject token. */
export const DOCUMENT_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
