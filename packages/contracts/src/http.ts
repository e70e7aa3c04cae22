import { z } from 'zod';
import { ContainerTag, CustomId, DocumentStatus, DocumentType, EntityContext, FailureClass, FileType, METADATA_LIMITS, Metadata, MetadataInput, Stage } from './common.js';
import { Filters } from './filters.js';

/** Every 4xx/5xx body. `details` names the field and what is wrong with it. */
export const ErrorBody = z.object({ error: z.string(), details: z.string().optional() });
export type ErrorBody = z.infer<typeof ErrorBody>;

export const FilterByMetadata = z
  .record(z.string().min(1).max(256), z.union([z.string(), z.number().finite(), z.boolean(), z.array(z.string())]))
  .refine((m) => Buffer.byteLength(JSON.stringify(m)) <= METADATA_LIMITS.totalBytes, `filterByMetadata may be at most ${METADATA_LIMITS.totalBytes} bytes of JSON`);

/** POST /v3/documents — the official SDK's DocumentAddParams. */
export const AddDocumentRequest = z.object({
  content: z.string({ error: 'content is required and must be a string' }).min(1, 'content must not be empty'),
  customId: CustomId.optional(),
  containerTag: ContainerTag.optional(),
  /** Deprecated in favour of containerTag, still accepted. */
  containerTags: z.array(ContainerTag).max(100).optional(),
  metadata: MetadataInput.optional(),
  filterByMetadata: FilterByMetadata.optional(),
  entityContext: EntityContext.optional(),
  filepath: z.string().max(1024).optional(),
  taskType: z.enum(['memory', 'superrag']).optional(),
  dreaming: z.enum(['dynamic', 'instant']).optional(),
});
export type AddDocumentRequest = z.infer<typeof AddDocumentRequest>;

export const AddDocumentResponse = z.object({ id: z.string(), status: DocumentStatus });
export type AddDocumentResponse = z.infer<typeof AddDocumentResponse>;

/** Why a document failed, when it did. Not in the SDK's types; extra fields are harmless to it. */
export const DocumentError = z.object({ stage: Stage, reason: z.string(), class: FailureClass });

/** GET /v3/documents/{id} — every field the SDK's DocumentGetResponse names, null where unknown. */
export const DocumentResponse = z.object({
  id: z.string(),
  customId: z.string().nullable(),
  connectionId: z.string().nullable(),
  title: z.string().nullable(),
  summary: z.string().nullable(),
  type: DocumentType,
  status: DocumentStatus,
  content: z.string().nullable(),
  metadata: Metadata.nullable(),
  containerTags: z.array(z.string()),
  filepath: z.string().nullable(),
  source: z.string().nullable(),
  url: z.string().nullable(),
  ogImage: z.string().nullable(),
  raw: z.null(),
  spatialPoint: z.null(),
  taskType: z.enum(['memory', 'superrag']),
  createdAt: z.string(),
  updatedAt: z.string(),
  /** memstream additions: why it failed, and how many chunks are searchable. */
  error: DocumentError.nullable(),
  reason: z.string().nullable(),
  chunkCount: z.number().int().nonnegative(),
});
export type DocumentResponse = z.infer<typeof DocumentResponse>;

const TaskType = z.enum(['memory', 'superrag']);
const Dreaming = z.enum(['dynamic', 'instant']);

/** A count that may come as a number or as a string of digits (the SDK allows both). */
const countish = (name: string, min: number, max: number, def: number) =>
  z
    .union([z.number(), z.string().regex(/^\s*\d+\s*$/, `${name} must be a whole number`)], { error: `${name} must be a number` })
    .transform((v) => Number(v))
    .pipe(z.number().int(`${name} must be a whole number`).min(min, `${name} must be at least ${min}`).max(max, `${name} must be at most ${max}`))
    .default(def);

const boolish = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]);

/** PATCH /v3/documents/{id} — the SDK's DocumentUpdateParams. */
export const UpdateDocumentRequest = z
  .object({
    content: z.string().min(1, 'content must not be empty').optional(),
    metadata: MetadataInput.optional(),
    containerTag: ContainerTag.optional(),
    containerTags: z.array(ContainerTag).max(100).optional(),
    customId: CustomId.optional(),
    filepath: z.string().max(1024).optional(),
    taskType: TaskType.optional(),
  })
  .strict();
export type UpdateDocumentRequest = z.infer<typeof UpdateDocumentRequest>;

/** POST /v3/documents/list — the SDK's DocumentListParams. */
export const ListDocumentsRequest = z
  .object({
    limit: countish('limit', 1, 200, 50),
    page: countish('page', 1, 1_000_000, 1),
    containerTags: z.array(ContainerTag).max(100).optional(),
    sort: z.enum(['createdAt', 'updatedAt'], { error: 'sort must be createdAt or updatedAt' }).default('createdAt'),
    order: z.enum(['asc', 'desc'], { error: 'order must be asc or desc' }).default('desc'),
    filters: Filters.optional(),
    includeContent: boolish.default(false),
    /** Exact path, or a prefix when it ends with '/'. */
    filepath: z.string().max(1024).optional(),
    /** memstream addition (the console, the MCP tools): only documents with one of these statuses. */
    statuses: z.array(DocumentStatus).min(1).max(6).optional(),
  })
  .strict();
export type ListDocumentsRequest = z.infer<typeof ListDocumentsRequest>;

/** One document in a list answer: the SDK's DocumentListResponse.Memory. */
export const DocumentListItem = DocumentResponse.pick({
  id: true,
  customId: true,
  connectionId: true,
  title: true,
  summary: true,
  type: true,
  status: true,
  metadata: true,
  containerTags: true,
  filepath: true,
  url: true,
  createdAt: true,
  updatedAt: true,
}).extend({ content: z.string().nullable().optional() });
export type DocumentListItem = z.infer<typeof DocumentListItem>;

export const ListDocumentsResponse = z.object({
  memories: z.array(DocumentListItem),
  pagination: z.object({ currentPage: z.number(), totalPages: z.number(), totalItems: z.number(), limit: z.number() }),
});
export type ListDocumentsResponse = z.infer<typeof ListDocumentsResponse>;

/** GET /v3/documents/processing */
export const ProcessingResponse = z.object({
  documents: z.array(
    DocumentResponse.pick({ id: true, customId: true, title: true, type: true, status: true, metadata: true, containerTags: true, createdAt: true, updatedAt: true }),
  ),
  totalCount: z.number(),
});
export type ProcessingResponse = z.infer<typeof ProcessingResponse>;

/** One item of POST /v3/documents/batch: a document, or just its content. */
export const BatchItem = z.union([
  z.string().min(1, 'content must not be empty'),
  z.object({
    content: z.string({ error: 'content is required and must be a string' }).min(1, 'content must not be empty'),
    customId: CustomId.optional(),
    containerTag: ContainerTag.optional(),
    containerTags: z.array(ContainerTag).max(100).optional(),
    metadata: MetadataInput.optional(),
    filepath: z.string().max(1024).optional(),
    taskType: TaskType.optional(),
    entityContext: EntityContext.optional(),
  }),
]);
export type BatchItem = z.infer<typeof BatchItem>;

export const BATCH_MAX = 100;

/** POST /v3/documents/batch — the SDK's DocumentBatchAddParams. Items are validated one by one. */
export const BatchAddRequest = z.object({
  documents: z.array(z.unknown(), { error: 'documents must be an array' }).min(1, 'documents must not be empty').max(BATCH_MAX, `at most ${BATCH_MAX} documents per batch`),
  containerTag: ContainerTag.optional(),
  containerTags: z.array(ContainerTag).max(100).optional(),
  metadata: MetadataInput.optional(),
  filepath: z.string().max(1024).optional(),
  taskType: TaskType.optional(),
  content: z.null().optional(),
});
export type BatchAddRequest = z.infer<typeof BatchAddRequest>;

export const BatchAddResponse = z.object({
  results: z.array(z.object({ id: z.string(), status: z.string(), error: z.string().optional(), details: z.string().optional() })),
  success: z.number(),
  failed: z.number(),
});
export type BatchAddResponse = z.infer<typeof BatchAddResponse>;

/** DELETE /v3/documents/bulk — by ids, by container tags, or by filepath. */
export const BulkDeleteRequest = z
  .object({
    // An empty list selects nothing rather than everything: refused, so a client bug cannot wipe a scope.
    ids: z.array(z.string().min(1).max(128)).min(1, 'ids must not be empty').max(1000, 'at most 1000 ids per request').optional(),
    containerTags: z
      .array(ContainerTag)
      .min(1, 'containerTags must not be empty (to delete a whole container tag, DELETE /v3/container-tags/{tag})')
      .max(100)
      .optional(),
    filepath: z.string().min(1).max(1024).optional(),
  })
  .strict()
  .refine((b) => b.ids !== undefined || b.containerTags !== undefined || b.filepath !== undefined, {
    message: 'send ids, containerTags or filepath',
  });
export type BulkDeleteRequest = z.infer<typeof BulkDeleteRequest>;

export const BulkDeleteResponse = z.object({
  success: z.boolean(),
  deletedCount: z.number(),
  errors: z.array(z.object({ id: z.string(), error: z.string() })).optional(),
  containerTags: z.array(z.string()).optional(),
});
export type BulkDeleteResponse = z.infer<typeof BulkDeleteResponse>;

/** A JSON object sent as a multipart string field. */
const jsonField = <T extends z.ZodType>(name: string, schema: T) =>
  z
    .string()
    .transform((v, ctx) => {
      try {
        return JSON.parse(v) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: `${name} must be a JSON string` });
        return z.NEVER;
      }
    })
    .pipe(schema);

/** POST /v3/documents/file — every multipart field of the spec, as the strings they arrive as. */
export const UploadFileFields = z
  .object({
    containerTag: ContainerTag.optional(),
    /** Deprecated: a JSON array string, or one bare tag. */
    containerTags: z
      .string()
      .transform((v, ctx) => {
        const t = v.trim();
        if (!t.startsWith('[')) return [t];
        try {
          return JSON.parse(t) as unknown;
        } catch {
          ctx.addIssue({ code: 'custom', message: 'containerTags must be a JSON array string or a single tag' });
          return z.NEVER;
        }
      })
      .pipe(z.array(ContainerTag).max(100))
      .optional(),
    fileType: FileType.optional(),
    mimeType: z.string().regex(/^[\w.+-]+\/[\w.+-]+$/, 'mimeType must be an exact MIME type such as image/png').optional(),
    metadata: jsonField('metadata', MetadataInput).optional(),
    filterByMetadata: jsonField('filterByMetadata', FilterByMetadata).optional(),
    filepath: z.string().max(1024).optional(),
    useAdvancedProcessing: z.string().optional(),
    customId: CustomId.optional(),
    entityContext: EntityContext.optional(),
    taskType: TaskType.optional(),
    dreaming: Dreaming.optional(),
  })
  .strict()
  .refine((f) => !(f.fileType === 'image' || f.fileType === 'video') || f.mimeType !== undefined, {
    message: 'mimeType is required when fileType is image or video',
    path: ['mimeType'],
  });
export type UploadFileFields = z.infer<typeof UploadFileFields>;

export const MAX_UPLOAD_BYTES = 50 * 1024 * 1024;

/*
 * Scoped API keys (Supermemory's /v3/auth/scoped-key). The official SDK has no types for these
 * endpoints; the request fields, ranges and defaults follow Supermemory's documentation, and the
 * answer carries both `containerTag` (Supermemory's single-tag form) and `containerTags`.
 */

/** The paths a scoped key may use (admin-only paths, such as key management, answer 403). */
export const SCOPED_KEY_ENDPOINTS = ['/v3/documents', '/v3/memories', '/v3/search', '/v4/search'] as const;

/** A whole number given as a number or a string of digits. */
const intish = (name: string, min: number, max: number) =>
  z
    .union([z.number(), z.string().regex(/^\s*\d+\s*$/, `${name} must be a whole number`)], { error: `${name} must be a number` })
    .transform((v) => Number(v))
    .pipe(z.number().int(`${name} must be a whole number`).min(min, `${name} must be at least ${min}`).max(max, `${name} must be at most ${max}`));

/** POST /v3/auth/scoped-key */
export const CreateScopedKeyRequest = z
  .object({
    containerTag: ContainerTag.optional(),
    containerTags: z.array(ContainerTag).min(1, 'containerTags must not be empty').max(100, 'containerTags: at most 100 tags').optional(),
    name: z.string().trim().min(1, 'name must not be empty').max(100, 'name must be at most 100 characters').optional(),
    /** Absent: the key never expires (as in Supermemory). */
    expiresInDays: intish('expiresInDays', 1, 365).optional(),
    /** Requests per window; default 500. */
    rateLimitMax: intish('rateLimitMax', 1, 10_000).optional(),
    /** The window in milliseconds; default 60000. */
    rateLimitTimeWindow: intish('rateLimitTimeWindow', 1, 3_600_000).optional(),
  })
  .strict()
  .refine((b) => b.containerTag !== undefined || b.containerTags !== undefined, { message: 'send containerTag or containerTags', path: ['containerTag'] });
export type CreateScopedKeyRequest = z.infer<typeof CreateScopedKeyRequest>;

/** A scoped key as listed: everything but its secret. */
export const ScopedKeyInfo = z.object({
  id: z.string(),
  name: z.string(),
  /** The first of containerTags (Supermemory's single-tag field). */
  containerTag: z.string(),
  containerTags: z.array(z.string()),
  createdAt: z.string(),
  expiresAt: z.string().nullable(),
  rateLimitMax: z.number(),
  rateLimitTimeWindow: z.number(),
  allowedEndpoints: z.array(z.string()),
  revoked: z.boolean(),
  revokedAt: z.string().nullable(),
  expired: z.boolean(),
});
export type ScopedKeyInfo = z.infer<typeof ScopedKeyInfo>;

/** The answer to POST /v3/auth/scoped-key: the only time the key itself is shown. */
export const CreateScopedKeyResponse = ScopedKeyInfo.extend({ key: z.string() });
export type CreateScopedKeyResponse = z.infer<typeof CreateScopedKeyResponse>;

/** GET /v3/auth/scoped-key */
export const ListScopedKeysResponse = z.object({ keys: z.array(ScopedKeyInfo) });
export type ListScopedKeysResponse = z.infer<typeof ListScopedKeysResponse>;

/** DELETE /v3/auth/scoped-key/{id} */
export const RevokeScopedKeyResponse = z.object({ success: z.boolean(), id: z.string(), revokedAt: z.string() });
export type RevokeScopedKeyResponse = z.infer<typeof RevokeScopedKeyResponse>;

/** A 429 body; the same wait is in the Retry-After (seconds) and retry-after-ms headers. */
export const RateLimitErrorBody = ErrorBody.extend({ retryAfterSeconds: z.number() });
export type RateLimitErrorBody = z.infer<typeof RateLimitErrorBody>;

/** Core NATS subject of the key.expiring notice (at most once per key per day). */
export const KEY_EXPIRING_SUBJECT = 'keys.expiring';

/** Published on KEY_EXPIRING_SUBJECT when a scoped key is within MEMSTREAM_KEY_EXPIRY_WARN_DAYS of expiring. */
export const KeyExpiringNotice = z.object({
  /** key.expiring.<keyId>.<day>: the same for every copy of one day's notice. */
  id: z.string(),
  type: z.literal('key.expiring'),
  keyId: z.string(),
  name: z.string(),
  containerTags: z.array(z.string()),
  expiresAt: z.string(),
  /** Whole days left, rounded down (0: expires within a day). */
  daysLeft: z.number().int(),
  /** The UTC day this notice is for (YYYY-MM-DD): one notice per key per day. */
  day: z.string(),
  occurredAt: z.string(),
});
export type KeyExpiringNotice = z.infer<typeof KeyExpiringNotice>;
