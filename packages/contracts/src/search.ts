import { z } from 'zod';
import { ContainerTag, CUSTOM_ID_PATTERN, Metadata } from './common.js';
import { DOCUMENT_ID_PATTERN } from './names.js';
import { Filters } from './filters.js';

/**
 * POST /v3/search and POST /v4/search, in the shapes of the official SDK (supermemory 4.25.4):
 * `client.search.documents` / `client.search.execute` send V3SearchRequest and read
 * V3SearchResponse; `client.search` / `client.search.memories` send V4SearchRequest and read
 * V4SearchResponse.
 *
 * Both request schemas are strict: every field the SDK names is accepted, anything else is a
 * 400 naming it. A search that silently dropped a misspelt `containerTag` would search every
 * tag, so an unknown field must not pass unnoticed.
 */

/** The longest query accepted: bounds the cost of embedding and of the keyword query. */
export const MAX_QUERY_CHARS = 10_000;
/** The most results one search returns (documents for v3, hits for v4). */
export const MAX_SEARCH_LIMIT = 100;

const boolish = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')], { error: 'must be a boolean' });

/** A count that may come as a number or as a string of digits. */
const countish = (name: string, min: number, max: number, def: number) =>
  z
    .union([z.number(), z.string().regex(/^\s*\d+\s*$/, `${name} must be a whole number`)], { error: `${name} must be a number` })
    .transform((v) => Number(v))
    .pipe(z.number().int(`${name} must be a whole number`).min(min, `${name} must be at least ${min}`).max(max, `${name} must be at most ${max}`))
    .default(def);

/** A number in 0..1 (a threshold), as a number or a numeric string. */
const fraction = (name: string) =>
  z
    .union([z.number(), z.string().regex(/^\s*\d*\.?\d+\s*$/, `${name} must be a number between 0 and 1`)], { error: `${name} must be a number between 0 and 1` })
    .transform((v) => Number(v))
    .pipe(z.number().min(0, `${name} must be at least 0`).max(1, `${name} must be at most 1`));

/**
 * The default `chunkThreshold` (v3) and `threshold` (v4). Search scores are absolute (0..1, see
 * docs/search.md): 0.9 × the keyword score + 0.1 × the cosine rescaled from 0.3..1. A chunk
 * sharing no word with the query and no closer than cosine 0.3 (where unrelated text sits)
 * scores 0, so a query about nothing the store holds returns nothing, while a chunk found only
 * by meaning (a paraphrase, cosine ≳ 0.4) still passes.
 */
export const DEFAULT_SEARCH_THRESHOLD = 0.01;

const Query = z
  .string({ error: 'q is required and must be a string' })
  .max(MAX_QUERY_CHARS, `q must be at most ${MAX_QUERY_CHARS} characters`)
  .refine((q) => q.trim().length > 0, 'q must not be empty');

const Filepath = z.string().min(1, 'filepath must not be empty').max(1024);

/** POST /v3/search — the SDK's SearchDocumentsParams (= SearchExecuteParams). */
export const V3SearchRequest = z
  .object({
    q: Query,
    containerTag: ContainerTag.optional(),
    containerTags: z.array(ContainerTag).max(100).optional(),
    filters: Filters.optional(),
    limit: countish('limit', 1, MAX_SEARCH_LIMIT, 10),
    /** Chunks whose score (0..1) is below this are left out; a document with none left is too. */
    chunkThreshold: fraction('chunkThreshold').default(DEFAULT_SEARCH_THRESHOLD),
    /** Deprecated by the SDK ("ignored"): accepted and ignored, as there. */
    documentThreshold: fraction('documentThreshold').optional(),
    /** Search within one document, named by its id or its customId. */
    docId: z
      .string()
      .min(1, 'docId must not be empty')
      .max(128, 'docId must be at most 128 characters')
      .refine((v) => DOCUMENT_ID_PATTERN.test(v) || CUSTOM_ID_PATTERN.test(v), 'docId must be a document id or a customId')
      .optional(),
    /** Exact path, or every path under it when it ends with '/'. */
    filepath: Filepath.optional(),
    /** true: only the matching chunks; false: each matching chunk with the chunk before and after it. */
    onlyMatchingChunks: boolish.default(true),
    includeFullDocs: boolish.default(false),
    includeSummary: boolish.default(false),
    /** Accepted; memstream has no reranking or query-rewriting model, so they change nothing. */
    rerank: boolish.default(false),
    rewriteQuery: boolish.default(false),
    /** Deprecated by the SDK; accepted and ignored. */
    categoriesFilter: z.array(z.string().max(256)).max(100).optional(),
  })
  .strict();
export type V3SearchRequest = z.infer<typeof V3SearchRequest>;

/** One chunk of a v3 result: the SDK's SearchDocumentsResponse.Result.Chunk. */
export const V3SearchChunk = z.object({
  content: z.string(),
  /** true for a chunk that matched; false for a neighbour sent as context (onlyMatchingChunks: false). */
  isRelevant: z.boolean(),
  /** Normalised hybrid score in 0..1 (0 for a context chunk that did not match). */
  score: z.number(),
});
export type V3SearchChunk = z.infer<typeof V3SearchChunk>;

/** One document of a v3 answer: exactly the fields of SearchDocumentsResponse.Result. */
export const V3SearchResult = z.object({
  documentId: z.string(),
  title: z.string().nullable(),
  type: z.string().nullable(),
  /** The best score of the document's chunks, normalised to 0..1. */
  score: z.number(),
  /** In document order. */
  chunks: z.array(V3SearchChunk),
  metadata: Metadata.nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
  /** The whole document's text: only with includeFullDocs. */
  content: z.string().nullable().optional(),
  summary: z.string().nullable().optional(),
});
export type V3SearchResult = z.infer<typeof V3SearchResult>;

export const V3SearchResponse = z.object({
  results: z.array(V3SearchResult),
  /** Milliseconds the search took inside the gateway. */
  timing: z.number(),
  /** How many results are in this answer. */
  total: z.number(),
});
export type V3SearchResponse = z.infer<typeof V3SearchResponse>;

/** The SDK's SearchMemoriesParams.Include. */
export const V4SearchInclude = z
  .object({
    /** Deprecated by the SDK: each hit also carries itself as `chunks: [{content, documentId, position, score}]`. */
    chunks: boolish.optional(),
    /** The source documents in each hit's `documents` (chunk hits always carry theirs; memory hits when this is set). */
    documents: boolish.optional(),
    /** Forgotten and expired memories are searched too. */
    forgottenMemories: boolish.optional(),
    /** `context` on memory hits: earlier versions (parents), later ones (children), linked memories (related). */
    relatedMemories: boolish.optional(),
    /** `summary` in each `documents` entry. */
    summaries: boolish.optional(),
  })
  .strict();

/** POST /v4/search — the SDK's SearchMemoriesParams (= SearchParams). */
export const V4SearchRequest = z
  .object({
    q: Query,
    containerTag: ContainerTag.optional(),
    filters: Filters.optional(),
    limit: countish('limit', 1, MAX_SEARCH_LIMIT, 10),
    /** Hits whose similarity is below this are left out. */
    threshold: fraction('threshold').default(DEFAULT_SEARCH_THRESHOLD),
    /**
     * `memories` (the SDK's default): memory hits, the `memory` field; `documents`: chunk hits,
     * the `chunk` field; `hybrid`: both kinds, each hit one kind, neither crowding the other out.
     */
    searchMode: z.enum(['memories', 'hybrid', 'documents'], { error: 'searchMode must be memories, hybrid or documents' }).default('memories'),
    filepath: Filepath.optional(),
    include: V4SearchInclude.optional(),
    /** Accepted; memstream has no reranking, query-rewriting or aggregating model, so they change nothing. */
    rerank: boolish.default(false),
    rewriteQuery: boolish.default(false),
    aggregate: boolish.default(false),
  })
  .strict();
export type V4SearchRequest = z.infer<typeof V4SearchRequest>;

/** The SDK's SearchMemoriesResponse.Result.Document. */
export const V4SearchDocument = z.object({
  id: z.string(),
  createdAt: z.string(),
  updatedAt: z.string(),
  metadata: Metadata.nullable().optional(),
  summary: z.string().nullable().optional(),
  title: z.string().optional(),
  type: z.string().optional(),
});

const ContextMemory = z.object({
  memory: z.string(),
  relation: z.enum(['updates', 'extends', 'derives']),
  updatedAt: z.string(),
  metadata: Metadata.nullable().optional(),
  version: z.number().nullable().optional(),
});

/** One hit of a v4 answer: the fields of SearchMemoriesResponse.Result that memstream can fill. */
export const V4SearchResult = z.object({
  /** A memory's id (`mem_…`), or `<documentId>:<chunk index>` for a chunk hit. */
  id: z.string(),
  /** A memory hit's version in its chain. */
  version: z.number().int().positive().optional(),
  /** The text, for searchMode memories or hybrid. */
  memory: z.string().optional(),
  /** The text, for searchMode documents or hybrid. */
  chunk: z.string().optional(),
  /** Normalised hybrid score in 0..1. */
  similarity: z.number(),
  metadata: Metadata.nullable(),
  updatedAt: z.string(),
  filepath: z.string().nullable().optional(),
  documents: z.array(V4SearchDocument).optional(),
  chunks: z.array(z.object({ content: z.string(), documentId: z.string(), position: z.number(), score: z.number() })).optional(),
  context: z
    .object({ children: z.array(ContextMemory).optional(), parents: z.array(ContextMemory).optional(), related: z.array(ContextMemory).optional() })
    .optional(),
});
export type V4SearchResult = z.infer<typeof V4SearchResult>;

export const V4SearchResponse = z.object({
  results: z.array(V4SearchResult),
  timing: z.number(),
  total: z.number(),
});
export type V4SearchResponse = z.infer<typeof V4SearchResponse>;
