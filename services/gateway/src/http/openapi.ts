import { z } from 'zod';
import {
  AddDocumentRequest,
  AddDocumentResponse,
  BatchAddRequest,
  BatchAddResponse,
  BulkDeleteRequest,
  BulkDeleteResponse,
  DocumentResponse,
  ErrorBody,
  ListDocumentsRequest,
  ListDocumentsResponse,
  ProcessingResponse,
  UpdateDocumentRequest,
  UploadFileFields,
} from '@memstream/contracts';

/** A JSON Schema of the request side (what a client may send: numeric strings, JSON strings). */
const input = (s: z.ZodType) => z.toJSONSchema(s, { io: 'input', unrepresentable: 'any', target: 'openapi-3.0' });
const output = (s: z.ZodType) => z.toJSONSchema(s, { io: 'output', unrepresentable: 'any', target: 'openapi-3.0' });

const json = (schema: object) => ({ content: { 'application/json': { schema } } });
const errors = {
  '400': { description: 'Invalid request: the details name the field', ...json({ $ref: '#/components/schemas/Error' }) },
  '401': { description: 'Missing or invalid API key', ...json({ $ref: '#/components/schemas/Error' }) },
};
const notFound = { '404': { description: 'No such document', ...json({ $ref: '#/components/schemas/Error' }) } };
const idParam = [{ name: 'id', in: 'path', required: true, description: 'Document id or customId', schema: { type: 'string' } }];

let cached: object | null = null;

/** The OpenAPI 3 document of everything the gateway implements, generated from the zod contracts. */
export function openApiDocument(): object {
  if (cached) return cached;
  cached = {
    openapi: '3.0.3',
    info: { title: 'memstream', version: '3.0.0', description: 'Supermemory-compatible /v3/documents, served by memstream.' },
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
    },
  };
  return cached;
}
