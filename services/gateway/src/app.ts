import express, { type Express } from 'express';
import { randomBytes } from 'node:crypto';
import type { Logger } from '@memstream/kit';
import { bearerAuth } from './http/auth.js';
import { errorMiddleware, notFound } from './http/errors.js';
import { addDocument, getDocument, toDocumentResponse, type GatewayPorts } from './handlers/documents.js';

export interface AppOptions {
  ports: GatewayPorts;
  apiKey: string;
  log: Logger;
  jsonLimit?: string;
  /** Broker and stores reachable? For /readyz. */
  ready?: () => Promise<void>;
}

/** A W3C traceparent for a request that came without one, so one trace follows a document through every stage. */
function traceparent(incoming: string | undefined): string {
  if (incoming && /^[\da-f]{2}-[\da-f]{32}-[\da-f]{16}-[\da-f]{2}$/.test(incoming)) return incoming;
  return `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;
}

/** The HTTP surface, with no listening socket: tests drive it directly. */
export function createApp(opts: AppOptions): Express {
  const { ports, log } = opts;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

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

  app.use((req, res, next) => {
    const tp = traceparent(req.header('traceparent'));
    res.locals.traceparent = tp;
    res.setHeader('x-trace-id', tp.split('-')[1]!);
    next();
  });
  app.use(bearerAuth(opts.apiKey));
  app.use(express.json({ limit: opts.jsonLimit ?? '10mb', type: () => true }));

  app.post('/v3/documents', async (req, res) => {
    const out = await addDocument(ports, req.body, { traceparent: res.locals.traceparent as string });
    log.info({ documentId: out.id }, 'document queued');
    res.json(out);
  });

  app.get('/v3/documents/:id', async (req, res) => {
    res.json(toDocumentResponse(await getDocument(ports, req.params.id)));
  });

  app.use(notFound);
  app.use(errorMiddleware(log));
  return app;
}
