import { z } from 'zod';
import { ContainerTag, DocumentType, FailureClass, FileType, Metadata, Stage } from './common.js';
import type { EventKind } from './names.js';
import { REDRIVE_ORDER, STAGE_STATUSES, type RedriveName, type StageStatus } from './pipeline.js';
import { DocumentSettings } from './settings.js';

/**
 * Document events. Each type is versioned: a breaking change is a new `.vN` with an upcaster,
 * never an edit of an existing schema.
 */

/** What the gateway accepted: inline text, or a file already stored in the Object Store. */
export const SubmittedInput = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('text'), content: z.string() }),
  z.object({
    kind: z.literal('blob'),
    key: z.string(),
    filename: z.string().nullable(),
    mimeType: z.string().nullable(),
    size: z.number().int().nonnegative(),
    sha256: z.string(),
  }),
]);
export type SubmittedInput = z.infer<typeof SubmittedInput>;

/** The pipeline stages a re-drive may start from (`memstream replay redrive --from`). */
export const RedriveStage = z.enum(REDRIVE_ORDER as unknown as readonly [RedriveName, ...RedriveName[]]);
export type RedriveStage = z.infer<typeof RedriveStage>;

/**
 * A re-drive: this revision re-processes revision `ofRevision` of the same input from stage
 * `from`. Stages before `from` do not recompute: they re-emit what they emitted for `ofRevision`.
 * Carried on submitted, extracted and chunked, so each stage knows without a look-up.
 */
export const Redrive = z.object({ from: RedriveStage, ofRevision: z.number().int().positive() });
export type Redrive = z.infer<typeof Redrive>;

export const DocumentSubmittedData = z.object({
  input: SubmittedInput,
  /** sha256 of the submitted content or file bytes; an unchanged re-submission is recognised by it. */
  contentHash: z.string(),
  customId: z.string().nullable(),
  containerTags: z.array(ContainerTag),
  metadata: Metadata,
  entityContext: z.string().nullable(),
  filterByMetadata: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.array(z.string())])).nullable(),
  fileType: FileType.nullable(),
  mimeType: z.string().nullable(),
  filepath: z.string().nullable(),
  taskType: z.enum(['memory', 'superrag']),
  dreaming: z.enum(['dynamic', 'instant']),
  /** The metadata version these tags and metadata come from (see metadata-updated): a later update wins over them. */
  metadataVersion: z.number().int().nonnegative(),
  /** Set when this revision is a re-drive of an earlier one rather than new content. */
  redrive: Redrive.optional(),
  /** The submitting key's settings that shape processing (chunk size, extraction filters), when any is set. */
  settings: DocumentSettings.optional(),
});
export type DocumentSubmittedData = z.infer<typeof DocumentSubmittedData>;

export const StageStartedData = z.object({ stage: z.enum(STAGE_STATUSES as unknown as readonly [StageStatus, ...StageStatus[]]) });

export const ExtractedData = z.object({
  title: z.string().nullable(),
  type: DocumentType,
  text: z.string(),
  url: z.string().nullable(),
  /** Hints the chunker may use: markdown headings, conversation turns. */
  format: z.enum(['plain', 'markdown', 'conversation']),
  /** The revision's re-drive, passed on to the chunker. */
  redrive: Redrive.optional(),
  /** The chunk size the submitting key set (DocumentSettings.chunkSize), passed on to the chunker. */
  chunkSize: z.number().int().min(32).max(8192).optional(),
});
export type ExtractedData = z.infer<typeof ExtractedData>;

export const Chunk = z.object({
  index: z.number().int().nonnegative(),
  /** sha256 of the chunk text: the key of the content-addressed embedding cache. */
  hash: z.string(),
  text: z.string(),
  tokens: z.number().int().nonnegative(),
});
export type Chunk = z.infer<typeof Chunk>;

export const ChunkedData = z.object({
  tokenizer: z.string(),
  chunks: z.array(Chunk),
  /** The revision's re-drive, passed on to the embedder. */
  redrive: Redrive.optional(),
});
export type ChunkedData = z.infer<typeof ChunkedData>;

export const EmbeddedChunk = Chunk.extend({
  /** Little-endian float32 vector, base64: exact and a quarter of the size of a JSON number array. */
  vector: z.string(),
});
export type EmbeddedChunk = z.infer<typeof EmbeddedChunk>;

export const EmbeddedData = z.object({
  model: z.string(),
  dim: z.number().int().positive(),
  chunks: z.array(EmbeddedChunk),
  /** How many chunk vectors were computed now rather than taken from the cache. */
  computed: z.number().int().nonnegative(),
});
export type EmbeddedData = z.infer<typeof EmbeddedData>;

export const IndexedData = z.object({
  model: z.string(),
  dim: z.number().int().positive(),
  chunkCount: z.number().int().nonnegative(),
  removed: z.number().int().nonnegative(),
});

export const FailedData = z.object({ stage: Stage, reason: z.string(), class: FailureClass });
export type FailedData = z.infer<typeof FailedData>;

/**
 * Tags and metadata changed in place (no new revision, no reprocessing). Carries the full
 * resulting values and a per-document version, so whatever order updates are applied in, the
 * highest version wins.
 */
export const MetadataUpdatedData = z.object({
  metadata: Metadata,
  containerTags: z.array(ContainerTag),
  version: z.number().int().positive(),
});

export const DeletedData = z.object({ reason: z.enum(['api', 'bulk']).default('api') });

const dataSchemas = {
  'document.submitted.v1': DocumentSubmittedData,
  'document.stage-started.v1': StageStartedData,
  'document.extracted.v1': ExtractedData,
  'document.chunked.v1': ChunkedData,
  'document.embedded.v1': EmbeddedData,
  'document.indexed.v1': IndexedData,
  'document.failed.v1': FailedData,
  'document.metadata-updated.v1': MetadataUpdatedData,
  'document.deleted.v1': DeletedData,
} as const;

export type EventType = keyof typeof dataSchemas;

/** Whether an event's data has a `redrive` field (a stage re-emitting its earlier output carries the re-drive on). */
export function carriesRedrive(type: EventType): boolean {
  return 'redrive' in dataSchemas[type].shape;
}
export const EVENT_TYPES = Object.keys(dataSchemas) as EventType[];

/** The subject token of each event type. */
export const EVENT_KIND_OF: Record<EventType, EventKind> = {
  'document.submitted.v1': 'submitted',
  'document.stage-started.v1': 'stage-started',
  'document.extracted.v1': 'extracted',
  'document.chunked.v1': 'chunked',
  'document.embedded.v1': 'embedded',
  'document.indexed.v1': 'indexed',
  'document.failed.v1': 'failed',
  'document.metadata-updated.v1': 'metadata-updated',
  'document.deleted.v1': 'deleted',
};

const envelopeFields = {
  id: z.string().min(1).max(128),
  documentId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
  /** Every submission or content change starts a new revision; every stage event carries it. */
  revision: z.number().int().positive(),
  occurredAt: z.iso.datetime(),
  correlationId: z.string(),
  causationId: z.string().nullable(),
};

function envelope<T extends EventType>(type: T) {
  return z.object({ ...envelopeFields, type: z.literal(type), data: dataSchemas[type] });
}

export const DocumentSubmitted = envelope('document.submitted.v1');
export type DocumentSubmitted = z.infer<typeof DocumentSubmitted>;
export const StageStarted = envelope('document.stage-started.v1');
export type StageStarted = z.infer<typeof StageStarted>;
export const DocumentExtracted = envelope('document.extracted.v1');
export type DocumentExtracted = z.infer<typeof DocumentExtracted>;
export const DocumentChunked = envelope('document.chunked.v1');
export type DocumentChunked = z.infer<typeof DocumentChunked>;
export const DocumentEmbedded = envelope('document.embedded.v1');
export type DocumentEmbedded = z.infer<typeof DocumentEmbedded>;
export const DocumentIndexed = envelope('document.indexed.v1');
export type DocumentIndexed = z.infer<typeof DocumentIndexed>;
export const DocumentFailed = envelope('document.failed.v1');
export type DocumentFailed = z.infer<typeof DocumentFailed>;
export const DocumentMetadataUpdated = envelope('document.metadata-updated.v1');
export type DocumentMetadataUpdated = z.infer<typeof DocumentMetadataUpdated>;
export const DocumentDeleted = envelope('document.deleted.v1');
export type DocumentDeleted = z.infer<typeof DocumentDeleted>;

export const DocumentEvent = z.discriminatedUnion('type', [
  DocumentSubmitted,
  StageStarted,
  DocumentExtracted,
  DocumentChunked,
  DocumentEmbedded,
  DocumentIndexed,
  DocumentFailed,
  DocumentMetadataUpdated,
  DocumentDeleted,
]);
export type DocumentEvent = z.infer<typeof DocumentEvent>;
export type EventOf<T extends EventType> = Extract<DocumentEvent, { type: T }>;
export type DataOf<T extends EventType> = EventOf<T>['data'];

/**
 * The wire form: either the event itself, or the event with its data moved to the Object Store
 * (claim check) because it was too large for a message.
 */
export const ClaimCheck = z.object({ bucket: z.string(), key: z.string(), bytes: z.number().int().positive() });
export type ClaimCheck = z.infer<typeof ClaimCheck>;
export const WireEnvelope = z.object({
  ...envelopeFields,
  type: z.enum(EVENT_TYPES as [EventType, ...EventType[]]),
  data: z.unknown().optional(),
  claim: ClaimCheck.optional(),
});
export type WireEnvelope = z.infer<typeof WireEnvelope>;

/** Validate an event's full shape; throws a ZodError naming the bad field. */
export function parseEvent(value: unknown): DocumentEvent {
  return DocumentEvent.parse(value);
}
