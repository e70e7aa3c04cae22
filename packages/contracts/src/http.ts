import { z } from 'zod';
import { ContainerTag, CustomId, DocumentStatus, DocumentType, EntityContext, FailureClass, Metadata, Stage } from './common.js';

/** Every 4xx/5xx body. `details` names the field and what is wrong with it. */
export const ErrorBody = z.object({ error: z.string(), details: z.string().optional() });
export type ErrorBody = z.infer<typeof ErrorBody>;

export const FilterByMetadata = z.record(z.string().min(1), z.union([z.string(), z.number().finite(), z.boolean(), z.array(z.string())]));

/** POST /v3/documents — the official SDK's DocumentAddParams. */
export const AddDocumentRequest = z.object({
  content: z.string({ error: 'content is required and must be a string' }).min(1, 'content must not be empty'),
  customId: CustomId.optional(),
  containerTag: ContainerTag.optional(),
  /** Deprecated in favour of containerTag, still accepted. */
  containerTags: z.array(ContainerTag).max(100).optional(),
  metadata: Metadata.optional(),
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
