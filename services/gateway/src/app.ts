import express, { type Express, type Request, type RequestHandler } from 'express';
import { randomBytes } from 'node:crypto';
import type { Logger } from '@memstream/kit';
import { bearerAuth } from './http/auth.js';
import { errorMiddleware, notFound } from './http/errors.js';
import { openApiDocument } from './http/openapi.js';
import {
  addDocument,
  batchAdd,
  bulkDelete,
  deleteDocument,
  getDocument,
  listDocuments,
  listProcessing,
  toDocumentResponse,
  updateDocument,
  type GatewayPorts,
} from './handlers/documents.js';
import { documentTimeline } from './handlers/timeline.js';
import { searchDocuments, searchMemories, type SearchPorts } from './handlers/search.js';

export interface AppOptions {
  ports: GatewayPorts;
  apiKey: string;
  log: Logger;
  jsonLimit?: string;
  /** Broker and stores reachable? For /readyz. */
  ready?: () => Promise<void>;
  /** POST /v3/documents/file; absent in tests that do not need uploads. */
  uploadFile?: RequestHandler;
  /** POST /v3/search and /v4/search; absent in tests that do not search (the routes are then 404s). */
  search?: SearchPorts;
}

/** A W3C traceparent for a request that came without one, so one trace follows a document through every stage. */
function traceparent(incoming: string | undefined): string {
  if (incoming && /^[\da-f]{2}-[\da-f]{32}-[\da-f]{16}-[\da-f]{2}$/.test(incoming)) return incoming;
  return `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;
}

function trace(req: Request): Record<string, string> {
  return { traceparent: req.res!.locals.traceparent as string };
}

/** The HTTP surface, with no listening socket: tests drive it directly. */
export function createApp(opts: AppOptions): Express {
  const { ports, log } = opts;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // Query strings are not used for anything; the simple parser cannot be made to build deep objects.
  app.set('query parser', 'simple');

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    try {
      await opts.ready?.();
      res.json({ status: 'ready' });
    } catch (err) {
      res.status(503).json({ error: 'Not ready', details: String((err as Error).message ?? err) });
    }
  });
  app.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument());
  });

  // The former /v3/memories/* paths: 308 keeps the method and the body.
  app.use('/v3/memories', (req, res) => {
    res.redirect(308, '/v3/documents' + req.url);
  });

  app.use((req, res, next) => {
    const tp = traceparent(req.header('traceparent'));
    res.locals.traceparent = tp;
    res.setHeader('x-trace-id', tp.split('-')[1]!);
    next();
  });
  app.use(bearerAuth(opts.apiKey));
  // Every JSON-ish body is parsed whatever its declared type (DELETE bodies included); multipart is left to the upload route.
  app.use(express.json({ limit: opts.jsonLimit ?? '10mb', type: (req) => !String(req.headers['content-type'] ?? '').startsWith('multipart/') }));

  // Fixed paths before /{id}.
  app.get('/v3/documents/processing', async (_req, res) => {
    res.json(await listProcessing(ports));
  });
  app.delete('/v3/documents/bulk', async (req, res) => {
    res.json(await bulkDelete(ports, req.body));
  });
  app.post('/v3/documents/list', async (req, res) => {
    res.json(await listDocuments(ports, req.body ?? {}));
  });
  if (opts.uploadFile) app.post('/v3/documents/file', opts.uploadFile);
  app.post('/v3/documents/batch', async (req, res) => {
    res.json(await batchAdd(ports, req.body, trace(req)));
  });
  app.post('/v3/documents', async (req, res) => {
    const out = await addDocument(ports, req.body, trace(req));
    log.info({ documentId: out.id, status: out.status }, 'document accepted');
    res.json(out);
  });

  app.get('/v3/documents/:id/timeline', async (req, res) => {
    res.json(await documentTimeline(ports, req.params.id));
  });
  app.get('/v3/documents/:id', async (req, res) => {
    res.json(toDocumentResponse(await getDocument(ports, req.params.id)));
  });
  app.patch('/v3/documents/:id', async (req, res) => {
    res.json(await updateDocument(ports, req.params.id, req.body ?? {}, trace(req)));
  });
  app.delete('/v3/documents/:id', async (req, res) => {
    const id = await deleteDocument(ports, req.params.id);
    log.info({ documentId: id }, 'document deleted');
    res.status(204).end();
  });

  const search = opts.search;
  if (search) {
    // The SDK's search.documents / search.execute.
    app.post('/v3/search', async (req, res) => {
      res.json(await searchDocuments(search, req.body));
    });
    // The SDK's search / search.memories.
    app.post('/v4/search', async (req, res) => {
      res.json(await searchMemories(search, req.body));
    });
  }

  app.use(notFound);
  app.use(errorMiddleware(log));
  return app;
}
