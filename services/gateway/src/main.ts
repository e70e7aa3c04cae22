// First: the OpenTelemetry SDK starts before any application module is loaded.
import { shutdownTelemetry } from '@memstream/telemetry';
import path from 'node:path';
import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import { blobStore, connectBus, ensureTopology, kvRateLimiter, readAdmission, within } from '@memstream/bus';
import { openChunkIndex } from '@memstream/chunk-index';
import { embedderConfigFrom, loadEmbedder, modelCache, rerankerFrom, sharedRateLimitFrom } from '@memstream/embedder';
import { createLogger, errorMessage, onShutdown } from '@memstream/kit';
import { openDocumentViews } from '@memstream/views';
import { CONSUMERS, PIPELINE } from '@memstream/contracts';
import { viewLanes } from './adapters/lanes.js';
import { loadConfig } from './config.js';
import { createApp } from './app.js';
import { jetstreamEventLog } from './adapters/event-log.js';
import { kvTagContexts } from './adapters/tag-contexts.js';
import { kvSettings } from './adapters/settings.js';
import { followActiveModel } from './adapters/active-model.js';
import { startKeyAuth } from './adapters/keys.js';
import { createUploadHandler } from './http/upload.js';
import { appServer } from './http/server.js';
import { jetstreamLifecycleSource, kvWebhookStore } from './adapters/webhooks.js';
import { EventStreams } from './http/events.js';
import { MemoryLog, ensureMemoryStream, openMemoryStore } from '@memstream/memory';

const config = loadConfig();
const log = createLogger('gateway', { level: config.LOG_LEVEL });

try {
  mkdirSync(config.MEMSTREAM_DATA_DIR, { recursive: true });
  const bus = await connectBus({ url: config.NATS_URL, name: 'memstream-gateway', log });
  await ensureTopology(bus.jsm, { ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS });
  const views = await openDocumentViews({
    sqlitePath: path.join(config.MEMSTREAM_DATA_DIR, 'views.sqlite'),
    ...(config.MONGODB_URL ? { mongodbUrl: config.MONGODB_URL } : {}),
  });
  const index = await openChunkIndex({
    sqlitePath: path.join(config.MEMSTREAM_DATA_DIR, 'index.sqlite'),
    ...(config.QDRANT_URL ? { qdrantUrl: config.QDRANT_URL } : {}),
    ...(config.QDRANT_API_KEY ? { qdrantApiKey: config.QDRANT_API_KEY } : {}),
  });
  const blobs = blobStore(bus);
  // Query embeddings draw from the same shared EMBEDDING_RPS budget as the embedder's replicas.
  const sharedRateLimit = sharedRateLimitFrom(config);
  const rateLimiter = sharedRateLimit ? await kvRateLimiter(bus, sharedRateLimit) : undefined;
  const embedder = await loadEmbedder(embedderConfigFrom(config), { rateLimiter });
  // The embedding model can be switched at run time (memstream replay embed): search follows NATS KV.
  const modelFor = modelCache(config, embedder, async (c) => {
    const limit = sharedRateLimitFrom(c);
    return loadEmbedder(embedderConfigFrom(c), { rateLimiter: limit ? await kvRateLimiter(bus, limit) : undefined });
  });
  const active = await followActiveModel(bus, { dataDir: config.MEMSTREAM_DATA_DIR, qdrantUrl: config.QDRANT_URL, qdrantApiKey: config.QDRANT_API_KEY, log, embedder, index, embedderFor: modelFor });
  // The memory store, shared with the memorizer (memories.sqlite, or Qdrant with QDRANT_URL); the gateway writes direct
  // writes, updates and forgets to the MEMORY stream and applies them itself, so they are
  // searchable when the call returns. Its vectors are of the configured embedding model.
  await ensureMemoryStream(bus.jsm);
  const memoryStore = await openMemoryStore({
    sqlitePath: path.join(config.MEMSTREAM_DATA_DIR, 'memories.sqlite'),
    embedder,
    qdrantUrl: config.QDRANT_URL,
    qdrantApiKey: config.QDRANT_API_KEY,
    qdrantCollection: config.QDRANT_MEMORY_COLLECTION,
  });
  const memories = { store: memoryStore, log: new MemoryLog(bus, memoryStore), embedder, views, now: () => new Date() };
  const tagContexts = await kvTagContexts(bus, { cacheMs: config.MEMSTREAM_KV_CACHE_MS, log });
  const settings = await kvSettings(bus, { cacheMs: config.MEMSTREAM_KV_CACHE_MS, log });
  const ports = { views, index: active.deletes, blobs, events: jetstreamEventLog(bus), tagContexts, settings,
    lanes: viewLanes(views, {
      threshold: config.MEMSTREAM_BULK_LANE_THRESHOLD,
      cacheMs: config.MEMSTREAM_BULK_LANE_CACHE_MS,
      // The normal lane's own backlog, from the same consumer infos the entrance admits bulk work by.
      crowding: {
        read: async () => {
          const r = await readAdmission(bus, CONSUMERS[PIPELINE[0].service].durable);
          return r.normalAhead + r.backlog;
        },
        at: config.MEMSTREAM_BULK_LANE_CROWDED_AT,
        threshold: config.MEMSTREAM_BULK_LANE_CROWDED_THRESHOLD,
      },
    }),
    now: () => new Date(),
  };
  // Scoped API keys (NATS KV, watched), their shared rate limits, and the key.expiring notices.
  const keyAuth = await startKeyAuth(bus, config, log);
  // Webhook registrations (NATS KV, shared with the notifier) and the SSE streams, ended first at shutdown.
  const eventStreams = new EventStreams();
  const webhooks = {
    ports: { store: await kvWebhookStore(bus), now: () => new Date(), allowPrivate: config.MEMSTREAM_WEBHOOK_ALLOW_PRIVATE },
    events: jetstreamLifecycleSource(bus),
    streams: eventStreams,
  };
  const app = createApp({
    webhooks,
    ports,
    apiKey: config.MEMSTREAM_API_KEY,
    log,
    jsonLimit: config.MEMSTREAM_JSON_LIMIT,
    maxAnswerBytes: config.MEMSTREAM_MAX_ANSWER_BYTES,
    uploadFile: createUploadHandler({ ports, blobs, log }),
    // Object.assign, not a spread: searchPorts' index and embedder are getters that follow the active model.
    search: Object.assign(active.searchPorts(views), { reranker: rerankerFrom(config) }),
    memories,
    auth: keyAuth.auth,
    ready: async () => {
      // Bounded: with the broker away a request waits for it rather than fails, and a probe must answer.
      await within(2_000, 'the broker', bus.jsm.getAccountInfo());
      await within(2_000, 'the stores', Promise.all([views.ping(), index.ping(), memoryStore.ping()]));
    },
  });
  const server: Server = await new Promise((resolve, reject) => {
    const s = appServer(app).listen(config.MEMSTREAM_PORT, config.MEMSTREAM_HOST, () => resolve(s));
    s.once('error', reject);
  });
  // Node checks both every `connectionsCheckingInterval` (30 s by default): a stalled request ends within that much past its limit.
  server.requestTimeout = config.MEMSTREAM_REQUEST_TIMEOUT_MS;
  server.headersTimeout = Math.min(config.MEMSTREAM_HEADERS_TIMEOUT_MS, config.MEMSTREAM_REQUEST_TIMEOUT_MS);
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.MEMSTREAM_PORT;
  onShutdown(log, [
    ['end event streams', () => eventStreams.closeAll()],
    ['stop accepting requests', () => new Promise<void>((r) => server.close(() => r()))],
    ['stop the API key and KV cache watches', async () => {
      tagContexts.close();
      settings.close();
      await keyAuth.stop();
    }],
    ['drain nats', () => bus.close()],
    ['close stores', async () => Promise.all([views.close(), index.close(), active.close(), memoryStore.close()])],
    ['flush telemetry', () => shutdownTelemetry()],
  ]);
  log.info({ url: `http://${config.MEMSTREAM_HOST}:${port}`, port }, 'ready');
} catch (err) {
  log.fatal({ err: errorMessage(err) }, 'failed to start');
  process.exit(1);
}
