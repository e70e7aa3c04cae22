import path from 'node:path';
import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import { blobStore, connectBus, ensureTopology } from '@memstream/bus';
import { openChunkIndex } from '@memstream/chunk-index';
import { createEmbedder, embedderConfigFrom } from '@memstream/embedder';
import { createLogger, errorMessage, onShutdown } from '@memstream/kit';
import { openDocumentViews } from '@memstream/views';
import { loadConfig } from './config.js';
import { createApp } from './app.js';
import { jetstreamEventLog } from './adapters/event-log.js';
import { kvTagContexts } from './adapters/tag-contexts.js';
import { createUploadHandler } from './http/upload.js';

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
  const ports = { views, index, blobs, events: jetstreamEventLog(bus), tagContexts: await kvTagContexts(bus), now: () => new Date() };
  const app = createApp({
    ports,
    apiKey: config.MEMSTREAM_API_KEY,
    log,
    jsonLimit: config.MEMSTREAM_JSON_LIMIT,
    uploadFile: createUploadHandler({ ports, blobs, log }),
    search: { index, views, embedder: createEmbedder(embedderConfigFrom(config)) },
    ready: async () => {
      await bus.jsm.getAccountInfo();
      await views.ping();
      await index.ping();
    },
  });
  const server: Server = await new Promise((resolve, reject) => {
    const s = app.listen(config.MEMSTREAM_PORT, config.MEMSTREAM_HOST, () => resolve(s));
    s.once('error', reject);
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.MEMSTREAM_PORT;
  onShutdown(log, [
    ['stop accepting requests', () => new Promise<void>((r) => server.close(() => r()))],
    ['drain nats', () => bus.close()],
    ['close stores', async () => Promise.all([views.close(), index.close()])],
  ]);
  log.info({ url: `http://${config.MEMSTREAM_HOST}:${port}`, port }, 'ready');
} catch (err) {
  log.fatal({ err: errorMessage(err) }, 'failed to start');
  process.exit(1);
}
