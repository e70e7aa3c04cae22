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
} from '@memstream/contracts';
import { webhookOpenApiPaths } from './webhooks.js';
import { containerTagOpenApiPaths } from './container-tags.js';

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
            'Scores lie in 0..1 and mean the same for every query (docs/search.md): 0.7 × the keyword score (BM25 over the best BM25 the query can reach) + 0.3 × the cosine rescaled from 0.2..1 to 0..1. chunkThreshold (default 0.2) applies to that score; a document scores its best chunk, and its matching chunks come best first.',
            'onlyMatchingChunks (default true): false adds the chunk before and after each match (isRelevant false, score 0).',
            'includeSummary gives summary (null: memstream has no summariser). documentThreshold and categoriesFilter are deprecated and ignored.',
            'rerank and rewriteQuery are accepted but do nothing: no reranking or query-rewriting model is configured.',
          ].join(' '),
          requestBody: { required: true, ...json(input(V3SearchRequest)) },
          responses: { '200': { description: 'Documents, best first', ...json(output(V3SearchResponse)) }, ...errors },
        },
      },
      '/v4/search': {
        post: {
          summary: 'Search memories: the best chunks, best first',
          description: [
            'In memstream a memory is a chunk: no separate memory extraction exists. Every searchMode searches the same chunks; the mode picks the field the text is sent in:',
            'memory (memories), chunk (documents), or both (hybrid, the default).',
            'Retrieval and scores are as for /v3/search: similarity is the hybrid score in 0..1, comparable across queries, and threshold (default 0.2) drops hits below it, so a query about nothing the store holds returns nothing.',
            'Each hit has id <documentId>:<chunk index>, and its document in documents[0]. include.chunks adds the hit as chunks[0]; include.relatedMemories adds an empty context (memstream keeps no relations); include.summaries adds summary (null).',
            'rerank, rewriteQuery and aggregate are accepted but do nothing: no model for them is configured. include.forgottenMemories changes nothing: memstream forgets nothing on its own.',
          ].join(' '),
          requestBody: { required: true, ...json(input(V4SearchRequest)) },
          responses: { '200': { description: 'Hits, best first', ...json(output(V4SearchResponse)) }, ...errors },
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
      ...webhookOpenApiPaths(),
      ...containerTagOpenApiPaths(),
    },
  };
  return cached;
}
