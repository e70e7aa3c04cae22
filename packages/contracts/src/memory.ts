import { z } from 'zod';
import { ContainerTag, EntityContext, Metadata } from './common.js';
import { Filters } from './filters.js';

/**
 * The memory layer (../shared/spec/memory-layer.md): memories are short statements learned from
 * documents, kept as version chains per container tag. Their log is its own stream (MEMORY),
 * one subject per container tag, so every change to one tag's memories is ordered and a writer
 * can publish with optimistic concurrency on that subject.
 */

export const STREAM_MEMORY = 'MEMORY';
export const MEMORY_SUBJECTS = 'mem.>';

/** Tags may hold '.', which NATS reads as a token separator: the subject carries the tag base64url-encoded. */
export function memorySubject(containerTag: string): string {
  return `mem.${Buffer.from(containerTag).toString('base64url')}`;
}

/** Memory ids start with `mem_`, so they can never be mistaken for document ids (which never do). */
export const MEMORY_ID_PATTERN = /^mem_[A-Za-z0-9_-]{8,64}$/;
export const MemoryId = z.string().regex(MEMORY_ID_PATTERN, 'a memory id looks like mem_… (a document id is not a memory id)');

export const MEMORY_RELATIONS = ['updates', 'extends', 'derives'] as const;
export const MemoryRelation = z.enum(MEMORY_RELATIONS);
export type MemoryRelation = z.infer<typeof MemoryRelation>;

export const TemporalContext = z.object({
  /** When the source document was written (ISO). */
  documentDate: z.string().nullable().optional(),
  /** When what it says happened (ISO), as dates found in the statement resolve against the document date. */
  eventDate: z.array(z.string()).nullable().optional(),
});
export type TemporalContext = z.infer<typeof TemporalContext>;

/** A (subject, attribute, value) the offline rules recognised: what makes one statement replace another. */
export const MemoryAttribute = z.object({ subject: z.string(), key: z.string(), value: z.string() });
export type MemoryAttribute = z.infer<typeof MemoryAttribute>;

/** Where a memory was learned: the document and, for extracted ones, the sentence it came from. */
export const MemorySource = z.object({ documentId: z.string(), text: z.string().nullable() });
export type MemorySource = z.infer<typeof MemorySource>;

/** One version of one memory, as the store holds it. */
export const MemoryRecord = z.object({
  id: MemoryId,
  containerTag: ContainerTag,
  memory: z.string(),
  version: z.number().int().positive(),
  isLatest: z.boolean(),
  parentMemoryId: z.string().nullable(),
  rootMemoryId: z.string().nullable(),
  /** The relation to the parent (a new version `updates` it); further links to other memories. */
  relations: z.array(z.object({ memoryId: z.string(), relation: MemoryRelation })),
  isForgotten: z.boolean(),
  forgetAfter: z.string().nullable(),
  forgetReason: z.string().nullable(),
  isStatic: z.boolean(),
  isInference: z.boolean(),
  attribute: MemoryAttribute.nullable(),
  documentIds: z.array(z.string()),
  sources: z.array(MemorySource),
  metadata: Metadata,
  temporalContext: TemporalContext,
  /** What made it: `offline-rules@1`, `llm:<model>`, `direct` (POST /v4/memories) or `user` (PATCH). */
  extractor: z.string(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type MemoryRecord = z.infer<typeof MemoryRecord>;

/** A statement an extractor proposes, before resolution against what the tag already knows. */
export const MemoryCandidate = z.object({
  memory: z.string().min(1),
  isStatic: z.boolean(),
  attribute: MemoryAttribute.nullable(),
  /** `forget`: the statement says an attribute no longer holds ("I no longer live in Lisbon"). */
  action: z.enum(['remember', 'forget']).default('remember'),
  eventDates: z.array(z.string()).default([]),
  forgetAfter: z.string().nullable().default(null),
  /** The source sentence, verbatim. */
  sourceText: z.string().nullable().default(null),
  /** Existing memories the extractor (a model) says this one updates or extends, by id. */
  updates: z.array(z.string()).default([]),
  extends: z.array(z.string()).default([]),
});
export type MemoryCandidate = z.infer<typeof MemoryCandidate>;

/** The changes one commit makes; each is one of the memory lifecycle events. */
export const MemoryChange = z.discriminatedUnion('type', [
  z.object({ type: z.literal('memory.created.v1'), memory: MemoryRecord }),
  /** A new version: `memory.parentMemoryId` stops being the latest. */
  z.object({ type: z.literal('memory.versioned.v1'), memory: MemoryRecord }),
  z.object({ type: z.literal('memory.linked.v1'), memoryId: z.string(), to: z.string(), relation: MemoryRelation }),
  /** The same fact stated again by another document: it strengthens rather than duplicates. */
  z.object({ type: z.literal('memory.source-added.v1'), memoryId: z.string(), source: MemorySource }),
  z.object({
    type: z.literal('memory.forgotten.v1'),
    memoryId: z.string(),
    reason: z.string().nullable(),
    cause: z.enum(['user', 'matching', 'source-deleted', 'statement']),
  }),
  /** A memory's forgetAfter changed without a new version. */
  z.object({ type: z.literal('memory.expiry-set.v1'), memoryId: z.string(), forgetAfter: z.string().nullable(), forgetReason: z.string().nullable() }),
]);
export type MemoryChange = z.infer<typeof MemoryChange>;

/** Why a commit was made; an extraction carries the extractor's raw decision, so a replay never calls a model. */
export const MemoryCause = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('extraction'),
    documentId: z.string(),
    revision: z.number().int().positive(),
    extractor: z.string(),
    candidates: z.array(MemoryCandidate),
    /** Tokens the model used (0 for the offline extractor). */
    tokens: z.number().int().nonnegative(),
    ms: z.number().nonnegative(),
  }),
  /**
   * `dreaming: "dynamic"`: a burst of one tag's documents memorized in one pass (docs/memory.md),
   * each document's extraction recorded as the single-document cause records it, in order.
   */
  z.object({
    kind: z.literal('extraction-group'),
    extractor: z.string(),
    documents: z
      .array(
        z.object({
          documentId: z.string(),
          revision: z.number().int().positive(),
          candidates: z.array(MemoryCandidate),
          tokens: z.number().int().nonnegative(),
          ms: z.number().nonnegative(),
          /** How many of the commit's changes, in order after the documents before it, this document led to. */
          changes: z.number().int().nonnegative().optional(),
        }),
      )
      .min(2),
  }),
  z.object({ kind: z.literal('direct-write'), documentId: z.string() }),
  z.object({ kind: z.literal('update') }),
  z.object({ kind: z.literal('forget') }),
  z.object({ kind: z.literal('forget-matching'), forgetBatchId: z.string() }),
  z.object({ kind: z.literal('document-deleted'), documentId: z.string() }),
]);
export type MemoryCause = z.infer<typeof MemoryCause>;

/**
 * One message of the MEMORY stream: every change one decision made to one tag's memories,
 * applied all or nothing. The memory store is the fold of these in stream order.
 */
export const MemoryCommit = z.object({
  id: z.string().min(1).max(200),
  type: z.literal('memory.committed.v1'),
  containerTag: ContainerTag,
  occurredAt: z.iso.datetime(),
  correlationId: z.string(),
  cause: MemoryCause,
  changes: z.array(MemoryChange),
});
export type MemoryCommit = z.infer<typeof MemoryCommit>;

// ---------------------------------------------------------------------------------------------
// HTTP

/** PATCH and DELETE name a memory by `id` or by its exact `content`: exactly one of them. */
const exactlyOne = { message: 'give exactly one of id and content', path: ['id'] };
const oneOf = (b: { id?: string | undefined; content?: string | undefined }) => (b.id === undefined) !== (b.content === undefined);

const IsoDate = z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time' });

/** PATCH /v4/memories (SDK memories.updateMemory): a new version. */
export const UpdateMemoryRequest = z
  .object({
    containerTag: ContainerTag,
    id: z.string().min(1).optional(),
    content: z.string().min(1).optional(),
    newContent: z.string().min(1, 'newContent must not be empty').max(10_000),
    metadata: Metadata.optional(),
    forgetAfter: IsoDate.nullable().optional(),
    forgetReason: z.string().max(1000).nullable().optional(),
    temporalContext: TemporalContext.optional(),
  })
  .strict()
  .refine(oneOf, exactlyOne);
export type UpdateMemoryRequest = z.infer<typeof UpdateMemoryRequest>;

/** DELETE /v4/memories (SDK memories.forget). */
export const ForgetMemoryRequest = z
  .object({ containerTag: ContainerTag, id: z.string().min(1).optional(), content: z.string().min(1).optional(), reason: z.string().max(1000).optional() })
  .strict()
  .refine(oneOf, exactlyOne);
export type ForgetMemoryRequest = z.infer<typeof ForgetMemoryRequest>;

/** POST /v4/memories: direct writes. */
export const CreateMemoriesRequest = z
  .object({
    containerTag: ContainerTag,
    memories: z
      .array(
        z
          .object({
            content: z.string().min(1, 'content must not be empty').max(10_000),
            isStatic: z.boolean().default(false),
            metadata: Metadata.optional(),
            forgetAfter: IsoDate.nullable().optional(),
            forgetReason: z.string().max(1000).nullable().optional(),
            temporalContext: TemporalContext.optional(),
          })
          .strict(),
      )
      .min(1, 'memories must hold 1 to 100 entries')
      .max(100, 'memories must hold 1 to 100 entries'),
  })
  .strict();
export type CreateMemoriesRequest = z.infer<typeof CreateMemoriesRequest>;

/** POST /v4/memories/list. */
export const ListMemoriesRequest = z
  .object({
    containerTags: z.array(ContainerTag).optional(),
    containerTag: ContainerTag.optional(),
    filters: Filters.optional(),
    limit: z.coerce.number().int().min(1).max(200).default(50),
    page: z.coerce.number().int().min(1).default(1),
    sort: z.enum(['createdAt', 'updatedAt']).default('createdAt'),
    order: z.enum(['asc', 'desc']).default('desc'),
  })
  .strict();
export type ListMemoriesRequest = z.infer<typeof ListMemoriesRequest>;

/** POST /v4/memories/forget-matching. */
export const ForgetMatchingRequest = z
  .object({
    containerTag: ContainerTag,
    ids: z.array(z.string()).min(1).max(1000).optional(),
    query: z.string().min(1).max(2000).optional(),
    dryRun: z.boolean().default(false),
    threshold: z.number().min(0).max(1).default(0.5),
    maxForget: z.number().int().min(1).max(1000).default(100),
    reason: z.string().max(1000).optional(),
  })
  .strict()
  .refine((b) => (b.ids === undefined) !== (b.query === undefined), { message: 'give exactly one of ids and query', path: ['ids'] });
export type ForgetMatchingRequest = z.infer<typeof ForgetMatchingRequest>;

/** POST /v4/profile (SDK client.profile). */
export const ProfileRequest = z
  .object({
    containerTag: ContainerTag,
    q: z.string().min(1).max(2000).optional(),
    threshold: z.number().min(0).max(1).default(0),
    filters: Filters.optional(),
  })
  .strict();
export type ProfileRequest = z.infer<typeof ProfileRequest>;

/** POST /v4/conversations: one document per conversation; later calls append. */
export const ConversationRequest = z
  .object({
    conversationId: z.string().min(1).max(100).regex(/^[a-zA-Z0-9_:-]+$/, 'conversationId may contain only letters, digits, hyphen, underscore and colon'),
    messages: z
      .array(z.object({ role: z.string().min(1).max(40), content: z.string().max(100_000), name: z.string().max(100).optional() }).strict())
      .min(1, 'messages must not be empty')
      .max(1000),
    containerTags: z.array(ContainerTag).max(20).optional(),
    containerTag: ContainerTag.optional(),
    metadata: Metadata.optional(),
    entityContext: EntityContext.optional(),
  })
  .strict();
export type ConversationRequest = z.infer<typeof ConversationRequest>;
