import express, { type Express, type Request, type RequestHandler } from 'express';
import type { Logger } from '@memstream/kit';
import { httpTelemetry, keepContext, metricsHandler } from '@memstream/telemetry';
import { authenticate, keyRoutes, scopeOf, type AuthOptions } from './http/auth.js';
import { errorMiddleware, notFound } from './http/errors.js';
import { fastRoute } from './http/fast-path.js';
import { answerSizeCap, closeEarlyRefusals, DEFAULT_MAX_ANSWER_BYTES } from './http/limits.js';
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
  retryDocument,
  type GatewayPorts,
} from './handlers/documents.js';
import { documentTimeline } from './handlers/timeline.js';
import { searchDocuments, searchMemories, type SearchPorts } from './handlers/search.js';
import { webhookRoutes, type WebhookRouteOptions } from './http/webhooks.js';
import { containerTagRoutes } from './http/container-tags.js';
import { settingsRoutes } from './http/settings.js';
import { isExpired } from './handlers/keys.js';
import { memoryRoutes } from './http/memories.js';
import { dreamingOf, type MemoryPorts } from './handlers/memories.js';
import { mcpRoutes } from './http/mcp.js';
import { consoleRoutes } from './http/console.js';
import { requestLog } from './http/request-log.js';

export interface AppOptions {
  ports: GatewayPorts;
  apiKey: string;
  log: Logger;
  jsonLimit?: string;
  /** The cap on one JSON answer (http/limits.ts). */
  maxAnswerBytes?: number;
  /** Broker and stores reachable? For /readyz. */
  ready?: () => Promise<void>;
  /** POST /v3/documents/file; absent in tests that do not need uploads. */
  uploadFile?: RequestHandler;
  /** POST /v3/search and /v4/search; absent in tests that do not search (the routes are then 404s). */
  search?: SearchPorts;
  /** Scoped keys and rate limits; absent: only the admin key, unlimited. */
  auth?: AuthOptions;
  /** The memory layer (/v4/profile, /v4/memories*, /v4/conversations, memory hits in /v4/search); absent in tests that do not need it. */
  memories?: MemoryPorts;
  /** /v3/webhooks and /v3/events (SSE); absent in tests that do not need them. */
  webhooks?: Omit<WebhookRouteOptions, 'log'>;
}

function trace(req: Request): Record<string, string> {
  return { traceparent: req.res!.locals.traceparent as string };
}

/** The HTTP surface, with no listening socket: tests drive it directly. */
export function createApp(opts: AppOptions): Express {
  const { ports, log } = opts;
  const errors = errorMiddleware(log);
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // Query strings are not used for anything; the simple parser cannot be made to build deep objects.
  app.set('query parser', 'simple');
  // First: every request is measured, and traced in a server span (continued from its
  // traceparent) whose context the handlers publish with (res.locals.traceparent, x-trace-id).
  const telemetry = httpTelemetry();
  app.use(telemetry);
  answerSizeCap(app, opts.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES);
  closeEarlyRefusals(app);
  // Sets res.locals.principal (see Principal in http/auth.ts) for every route after it.
  const auth = authenticate(opts.apiKey, opts.auth);
  // Every JSON-ish body is parsed whatever its declared type (DELETE bodies included); multipart is left to the upload route.
  const json = keepContext(express.json({ limit: opts.jsonLimit ?? '10mb', type: (req) => !String(req.headers['content-type'] ?? '').startsWith('multipart/') }));

  const add: RequestHandler = async (req, res) => {
    const out = await addDocument(ports, req.body, trace(req), scopeOf(res));
    // At debug: one line per add was a measurable part of the hottest request's cost.
    if (log.isLevelEnabled('debug')) requestLog(log, res).debug({ documentId: out.id, status: out.status }, 'document accepted');
    // Written as res.json would write it (the answer is far below the size cap), without res.send's checks.
    const text = JSON.stringify(out);
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  // The hottest route first, with only what it needs (auth, then the body), so an add does not
  // walk past every other route's layer; the same middlewares as every route below, in the same
  // order. Its exact URL does not meet the router at all (http/fast-path.ts).
  app.post('/v3/documents', auth, json, add);
  fastRoute(app, { method: 'POST', path: '/v3/documents' }, [telemetry, auth, json, add], errors);

  // Prometheus; open unless MEMSTREAM_METRICS_TOKEN is set (docs/observability.md).
  app.get('/metrics', metricsHandler());

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

  // The web console's static files (no secret in them; the page sends the key it is given).
  app.use(consoleRoutes());

  app.use(auth);
  app.use(json);

  if (opts.auth?.keys) app.use(keyRoutes(opts.auth.keys, log));

  // Fixed paths before /{id}. Every handler gets the caller's tag scope (null: the admin key).
  app.get('/v3/documents/processing', async (_req, res) => {
    res.json(await listProcessing(ports, scopeOf(res)));
  });
  app.delete('/v3/documents/bulk', async (req, res) => {
    res.json(await bulkDelete(ports, req.body, scopeOf(res), trace(req)));
  });
  app.post('/v3/documents/list', async (req, res) => {
    res.json(await listDocuments(ports, req.body ?? {}, scopeOf(res)));
  });
  if (opts.uploadFile) app.post('/v3/documents/file', opts.uploadFile);
  app.post('/v3/documents/batch', async (req, res) => {
    res.json(await batchAdd(ports, req.body, trace(req), scopeOf(res)));
  });
  app.post('/v3/documents/:id/retry', async (req, res) => {
    res.json(await retryDocument(ports, req.params.id, trace(req), scopeOf(res)));
  });
  app.get('/v3/documents/:id/timeline', async (req, res) => {
    res.json(await documentTimeline(ports, req.params.id, scopeOf(res)));
  });
  app.get('/v3/documents/:id', async (req, res) => {
    const view = await getDocument(ports, req.params.id, scopeOf(res));
    const dreaming = opts.memories ? await dreamingOf(opts.memories, view) : null;
    res.json({ ...toDocumentResponse(view), ...(dreaming ?? {}) });
  });
  app.patch('/v3/documents/:id', async (req, res) => {
    res.json(await updateDocument(ports, req.params.id, req.body ?? {}, trace(req), scopeOf(res)));
  });
  app.delete('/v3/documents/:id', async (req, res) => {
    const id = await deleteDocument(ports, req.params.id, 'api', scopeOf(res), trace(req));
    requestLog(log, res).info({ documentId: id }, 'document deleted');
    res.status(204).end();
  });

  app.use(containerTagRoutes(ports, log));
  if (ports.settings) app.use(settingsRoutes(ports.settings));

  const search = opts.search;
  if (search) {
    // The SDK's search.documents / search.execute.
    app.post('/v3/search', async (req, res) => {
      res.json(await searchDocuments(search, req.body, scopeOf(res)));
    });
    // The SDK's search / search.memories.
    app.post('/v4/search', async (req, res) => {
      res.json(await searchMemories(search, req.body, scopeOf(res), opts.memories));
    });
    // MCP over Streamable HTTP (docs/mcp.md): its tools search, so it comes with search.
    app.use(mcpRoutes({ ports, search, log, ...(opts.memories ? { memories: opts.memories } : {}) }));
  }

  if (opts.memories) app.use(memoryRoutes({ memories: opts.memories, documents: ports, log }));
  if (opts.webhooks) {
    const keys = opts.auth?.keys;
    // A stream outlives the request that authenticated it: revocation and expiry must end it too.
    const keyValid = keys
      ? async (keyId: string) => {
          const k = await keys.store.find(keyId);
          return k !== null && k.revokedAt === null && !isExpired(k, keys.now());
        }
      : undefined;
    // Webhooks too: a revoked or expired key's webhooks are listed as disabled (and the notifier skips them).
    const hookPorts = keys ? { ...opts.webhooks.ports, key: (keyId: string) => keys.store.find(keyId) } : opts.webhooks.ports;
    app.use(webhookRoutes({ ...opts.webhooks, ports: hookPorts, log, ...(keyValid ? { keyValid } : {}) }));
  }

  app.use(notFound);
  app.use(errors);
  return app;
}
