import { z } from 'zod';
import { PIPELINE, STAGE_STATUSES, type PipelineRow, type StageStatus } from './pipeline.js';

/** queued, the status each stage announces (pipeline.ts), then the two terminal ones: the order a document moves in. */
export const DOCUMENT_STATUSES = ['queued', ...STAGE_STATUSES, 'done', 'failed'] as unknown as readonly ['queued', ...StageStatus[], 'done', 'failed'];
export const DocumentStatus = z.enum(DOCUMENT_STATUSES as readonly ['queued' | StageStatus | 'done' | 'failed', ...Array<'queued' | StageStatus | 'done' | 'failed'>]);
export type DocumentStatus = z.infer<typeof DocumentStatus>;

/** The spec's file-type override values. */
export const FILE_TYPES = [
  'text',
  'pdf',
  'tweet',
  'google_doc',
  'google_slide',
  'google_sheet',
  'image',
  'video',
  'notion_doc',
  'webpage',
  'onedrive',
] as const;
export const FileType = z.enum(FILE_TYPES);
export type FileType = z.infer<typeof FileType>;

/** The kinds a document can have, as the official SDK's types name them. */
export const DOCUMENT_TYPES = [...FILE_TYPES, 'audio', 'github_markdown'] as const;
export const DocumentType = z.enum(DOCUMENT_TYPES);
export type DocumentType = z.infer<typeof DocumentType>;

/** What a failure is blamed on: one per pipeline stage (pipeline.ts). */
export const STAGES = PIPELINE.map((r) => r.stage) as unknown as readonly [PipelineRow['stage'], ...PipelineRow['stage'][]];
export const Stage = z.enum(STAGES);
export type Stage = z.infer<typeof Stage>;

export const FAILURE_CLASSES = ['permanent', 'poison', 'exhausted'] as const;
export const FailureClass = z.enum(FAILURE_CLASSES);
export type FailureClass = z.infer<typeof FailureClass>;

export const CUSTOM_ID_PATTERN = /^[a-zA-Z0-9_:-]+$/;
export const CustomId = z
  .string()
  .min(1, 'customId must not be empty')
  .max(100, 'customId must be at most 100 characters')
  .regex(CUSTOM_ID_PATTERN, 'customId may contain only letters, digits, hyphen, underscore and colon');

export const CONTAINER_TAG_PATTERN = /^[a-zA-Z0-9_:.@-]+$/;
export const ContainerTag = z
  .string()
  .min(1, 'containerTag must not be empty')
  .max(100, 'containerTag must be at most 100 characters')
  .regex(CONTAINER_TAG_PATTERN, 'containerTag may contain only letters, digits and _ : . @ -');

/** Flat metadata: string, number or boolean values, or arrays of strings. No nesting. */
export const MetadataValue = z.union([z.string(), z.number().finite(), z.boolean(), z.array(z.string())]);
export const Metadata = z.record(z.string().min(1).max(256), MetadataValue);

/**
 * What one request may send as metadata (docs/limits.md): metadata travels with the document
 * into every list and search answer, so one tenant's megabytes would become every reader's.
 * Only requests are checked: documents already in the log keep validating with `Metadata`.
 */
export const METADATA_LIMITS = { keys: 50, valueChars: 2_048, arrayItems: 100, totalBytes: 16 * 1024 } as const;
const limitedValue = z.union([
  z.string().max(METADATA_LIMITS.valueChars, `a metadata value may be at most ${METADATA_LIMITS.valueChars} characters`),
  z.number().finite(),
  z.boolean(),
  z
    .array(z.string().max(METADATA_LIMITS.valueChars, `a metadata value may be at most ${METADATA_LIMITS.valueChars} characters`))
    .max(METADATA_LIMITS.arrayItems, `a metadata array may hold at most ${METADATA_LIMITS.arrayItems} strings`),
]);
export const MetadataInput = z
  .record(z.string().min(1).max(256), limitedValue)
  .refine((m) => Object.keys(m).length <= METADATA_LIMITS.keys, `metadata may have at most ${METADATA_LIMITS.keys} keys`)
  .refine((m) => Buffer.byteLength(JSON.stringify(m)) <= METADATA_LIMITS.totalBytes, `metadata may be at most ${METADATA_LIMITS.totalBytes} bytes of JSON in all`);
export type Metadata = z.infer<typeof Metadata>;

export const EntityContext = z.string().max(1500, 'entityContext must be at most 1500 characters');
