import { z } from 'zod';
import {
  AddDocumentRequest,
  AddDocumentResponse,
  BatchAddRequest,
  BatchAddResponse,
  BulkDeleteRequest,
  BulkDeleteResponse,
  CreateScopedKeyRequest,
  CreateScopedKeyResponse,
  ListScopedKeysResponse,
  RateLimitErrorBody,
  RevokeScopedKeyResponse,
  DocumentResponse,
  ErrorBody,
  ListDocumentsRequest,
  ListDocumentsResponse,
  ProcessingResponse,
  UpdateDocumentRequest,
  UploadFileFields,
  V3SearchRequest,
  V3SearchResponse,
  V4SearchRequest,
  V4SearchResponse,
  ProfileRequest,
  CreateMemoriesRequest,
  UpdateMemoryRequest,
  ForgetMemoryRequest,
  ListMemoriesRequest,
  ForgetMatchingRequest,
  ConversationRequest,
} from '@memstream/contracts';
import { webhookOpenApiPaths } from './webhooks.js';
import { containerTagOpenApiPaths } from './container-tags.js';
import { settingsOpenApiPaths } from './settings.js';

/** A JSON Schema of the request side (what a client may send: numeric strings, JSON strings). */
const input = (s: z.ZodType) => z.toJSONSchema(s, { io: 'input', unrepresentable: 'any', target: 'openapi-3.0' });
const output = (s: z.ZodType) => z.toJSONSchema(s, { io: 'output', unrepresentable: 'any', target: 'openapi-3.0' });

const json = (schema: object) => ({ content: { 'application/json': { schema } } });
const errors = {
  '400': { description: 'Invalid request: the details name the field', ...json({ $ref: '#/components/schemas/Error' }) },
  '401': { description: 'Missing or invalid API key', ...json({ $ref: '#/components/schemas/Error' }) },
  '403': { description: "A scoped API key outside its container tags (docs/auth.md)", ...json({ $ref: '#/components/schemas/Error' }) },
  '429': { description: 'Rate limit: wait Retry-After seconds (retry-after-ms milliseconds)', ...json(output(RateLimitErrorBody)) },
};
const memoryNotFound = { description: 'No such memory in that container tag', ...json({ $ref: '#/components/schemas/Error' }) };
const notFound = { '404': { description: 'No such document', ...json({ $ref: '#/components/schemas/Error' }) } };
const idParam = [{ name: 'id', in: 'path', required: true, description: 'Document id or customId', schema: { type: 'string' } }];

let cached: object | null = null;

/** The OpenAPI 3 document of everything the gateway implements, generated from the zod contracts. */
export function openApiDocument(): object {
  if (cached) return cached;
  cached = {
    openapi: '3.0.3',
    info: { title: 'memstream', version: '3.0.0', description: 'Supermemory-compatible /v3/documents, /v3/search and /v4/search, served by memstream.' },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: { Error: output(ErrorBody), Document: output(DocumentResponse) },
    },
    security: [{ bearer: [] }],
    paths: {
      '/v3/documents': {
        post: {
          summary: 'Add content (text, conversation, URL, HTML or Markdown)',
          requestBody: { required: true, ...json(input(AddDocumentRequest)) },
          responses: { '200': { description: 'Accepted', ...json(output(AddDocumentResponse)) }, ...errors },
        },
      },
      '/v3/documents/file': {
        post: {
          summary: 'Upload a file (multipart/form-data, at most 50 MB)',
          requestBody: {
            required: true,
            content: {
              'multipart/form-data': {
                schema: { ...input(UploadFileFields), properties: { file: { type: 'string', format: 'binary' }, ...(input(UploadFileFields) as { properties?: object }).properties }, required: ['file'] },
              },
            },
          },
          responses: { '200': { description: 'Accepted', ...json(output(AddDocumentResponse)) }, ...errors, '413': { description: 'File over 50 MB', ...json({ $ref: '#/components/schemas/Error' }) } },
        },
      },
      '/v3/documents/batch': {
        post: { summary: 'Add several documents', requestBody: { required: true, ...json(input(BatchAddRequest)) }, responses: { '200': { description: 'Per-item results', ...json(output(BatchAddResponse)) }, ...errors } },
      },
      '/v3/documents/list': {
        post: { summary: 'List documents', requestBody: { required: false, ...json(input(ListDocumentsRequest)) }, responses: { '200': { description: 'A page', ...json(output(ListDocumentsResponse)) }, ...errors } },
      },
      '/v3/documents/processing': {
        get: { summary: 'Documents still being processed', responses: { '200': { description: 'In progress', ...json(output(ProcessingResponse)) }, ...errors } },
      },
      '/v3/documents/bulk': {
        delete: { summary: 'Delete by ids, container tags or filepath', requestBody: { required: true, ...json(input(BulkDeleteRequest)) }, responses: { '200': { description: 'Deleted', ...json(output(BulkDeleteResponse)) }, ...errors } },
      },
      '/v3/search': {
        post: {
          summary: 'Search documents: the best documents, each with its matching chunks',
          description: [
            'Hybrid retrieval: dense (the configured embedding model) and keyword (BM25) rankings fused by reciprocal rank fusion.',
            'containerTag/containerTags (any of), filters, docId and filepath restrict the search before ranking; a search never returns a document of another tag.',
            'Scores lie in 0..1 and mean the same for every query (docs/search.md): 0.9 × the keyword score (tanh of BM25 over the BM25 of a chunk holding each query word once) + 0.1 × the cosine rescaled from 0.3..1 to 0..1. chunkThreshold (default 0.01) applies to that score; a document scores its best chunk, and its matching chunks come best first.',
            'onlyMatchingChunks (default true): false adds the chunk before and after each match (isRelevant false, score 0).',
            'includeSummary gives summary (null: memstream has no summariser). documentThreshold and categoriesFilter are deprecated and ignored.',
            'rerank: true re-scores the best 50 candidates with the reranking server RERANKER_URL names (its 0..1 relevance becomes the score), and does nothing without one; rewriteQuery is accepted but does nothing: no query-rewriting model is configured.',
          ].join(' '),
          requestBody: { required: true, ...json(input(V3SearchRequest)) },
          responses: { '200': { description: 'Documents, best first', ...json(output(V3SearchResponse)) }, ...errors },
        },
      },
      '/v4/search': {
        post: {
          summary: 'Search memories (default), document chunks, or both',
          description: [
            'searchMode memories (the default): memory hits, each {id (mem_…), memory, similarity, metadata, updatedAt, version}; documents: chunk hits (chunk, id <documentId>:<index>, with their document); hybrid: both kinds, each hit one kind, each kind guaranteed up to half of limit so neither crowds the other out.',
            'Retrieval is dense + keyword; a memory\'s similarity is the RRF score divided by 2/(60+1), in 0..1 (1: first in both rankings), a chunk\'s the /v3/search score; threshold (default 0.01) drops hits below it; containerTag and filters (on the memory\'s carried metadata) restrict before ranking.',
            'Forgotten and expired memories are left out unless include.forgottenMemories; superseded versions are always left out. include.relatedMemories adds context: parents (earlier versions, version -1, -2…), children (later ones) and related (extends/derives links). include.documents adds a memory\'s source documents.',
            'rerank re-scores chunk hits as for /v3/search (a no-op without RERANKER_URL); rewriteQuery and aggregate are accepted but do nothing: no model for them is configured.',
          ].join(' '),
          requestBody: { required: true, ...json(input(V4SearchRequest)) },
          responses: { '200': { description: 'Hits, best first', ...json(output(V4SearchResponse)) }, ...errors },
        },
      },
      '/v4/profile': {
        post: {
          summary: "A container tag's profile: static = its live latest static memories, dynamic = its most recent live others; searchResults when q is given",
          requestBody: { required: true, ...json(input(ProfileRequest)) },
          responses: { '200': { description: 'Profile (never null: an empty tag has empty lists)', ...json({ type: 'object' }) }, ...errors },
        },
      },
      '/v4/memories': {
        post: {
          summary: 'Write memories directly (1–100); searchable when the call returns',
          requestBody: { required: true, ...json(input(CreateMemoriesRequest)) },
          responses: { '200': { description: '{documentId, memories}', ...json({ type: 'object' }) }, ...errors },
        },
        patch: {
          summary: 'Update a memory (by id or exact content): a new version whose parent is the latest of its chain',
          requestBody: { required: true, ...json(input(UpdateMemoryRequest)) },
          responses: { '200': { description: '{id, memory, version, parentMemoryId, rootMemoryId, createdAt, forgetAfter, forgetReason}', ...json({ type: 'object' }) }, ...errors, '404': memoryNotFound },
        },
        delete: {
          summary: 'Forget a memory (by id or exact content); include.forgottenMemories still finds it',
          requestBody: { required: true, ...json(input(ForgetMemoryRequest)) },
          responses: { '200': { description: '{id, forgotten: true}', ...json({ type: 'object' }) }, ...errors, '404': memoryNotFound },
        },
      },
      '/v4/memories/list': {
        post: {
          summary: 'Every version of the memories of the given tags, each with its history and documentIds',
          requestBody: { required: false, ...json(input(ListMemoriesRequest)) },
          responses: { '200': { description: '{memoryEntries, pagination}', ...json({ type: 'object' }) }, ...errors },
        },
      },
      '/v4/memories/forget-matching': {
        post: {
          summary: 'Forget memories by ids or by a query above threshold (at most maxForget); dryRun lists the candidates only',
          requestBody: { required: true, ...json(input(ForgetMatchingRequest)) },
          responses: { '200': { description: '{dryRun, count, forgetBatchId, summary, candidates | forgotten}', ...json({ type: 'object' }) }, ...errors },
        },
      },
      '/v4/conversations': {
        post: {
          summary: 'Add or extend a conversation: one document per conversationId; messages it already holds are not added again',
          requestBody: { required: true, ...json(input(ConversationRequest)) },
          responses: { '200': { description: '{id, conversationId, status}', ...json({ type: 'object' }) }, ...errors },
        },
      },
      '/v3/auth/scoped-key': {
        post: {
          summary: 'Create a scoped API key (admin key only); the key is in this answer only',
          requestBody: { required: true, ...json(input(CreateScopedKeyRequest)) },
          responses: { '200': { description: 'Created', ...json(output(CreateScopedKeyResponse)) }, ...errors },
        },
        get: { summary: 'List scoped API keys, without their secrets (admin key only)', responses: { '200': { description: 'Keys', ...json(output(ListScopedKeysResponse)) }, ...errors } },
      },
      '/v3/auth/scoped-key/{id}': {
        delete: {
          summary: 'Revoke a scoped API key on every gateway replica (admin key only)',
          parameters: [{ name: 'id', in: 'path', required: true, description: 'Key id', schema: { type: 'string' } }],
          responses: { '200': { description: 'Revoked', ...json(output(RevokeScopedKeyResponse)) }, ...errors, '404': { description: 'No such key', ...json({ $ref: '#/components/schemas/Error' }) } },
        },
      },
      '/v3/documents/{id}': {
        get: { summary: 'One document, with its content', parameters: idParam, responses: { '200': { description: 'The document', ...json({ $ref: '#/components/schemas/Document' }) }, ...errors, ...notFound } },
        patch: {
          summary: 'Update content (reprocessed) or metadata (in place)',
          parameters: idParam,
          requestBody: { required: true, ...json(input(UpdateDocumentRequest)) },
          responses: { '200': { description: 'Accepted', ...json(output(AddDocumentResponse)) }, ...errors, ...notFound },
        },
        delete: { summary: 'Delete permanently', parameters: idParam, responses: { '204': { description: 'Deleted' }, ...errors, ...notFound } },
      },
      '/v3/documents/{id}/retry': {
        post: {
          summary: 'memstream: submit a failed document again as it was last sent, as a new revision (400 unless failed)',
          parameters: idParam,
          responses: { '200': { description: 'Accepted', ...json(output(AddDocumentResponse)) }, ...errors, ...notFound },
        },
      },
      ...webhookOpenApiPaths(),
      ...containerTagOpenApiPaths(),
      ...settingsOpenApiPaths(),
    },
  };
  return cached;
}
