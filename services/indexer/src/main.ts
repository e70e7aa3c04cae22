import path from 'node:path';
import { mkdirSync } from 'node:fs';
import { latestRevision, startWorker } from '@memstream/bus';
import { openChunkIndex } from '@memstream/chunk-index';
import { createLogger } from '@memstream/kit';
import { loadConfig } from './config.js';
import { createIndexHandler, createMetadataHandler } from './handlers/index.js';
import { scopeFromLog } from './adapters/scope-from-log.js';

const config = loadConfig();
const log = createLogger('indexer', { level: config.LOG_LEVEL });

await startWorker({
  consumer: 'indexer',
  stage: 'indexing',
  skipStale: true,
  natsUrl: config.NATS_URL,
  ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS,
  concurrency: config.INDEXER_CONCURRENCY,
  log,
  setup: async (bus) => {
    mkdirSync(config.MEMSTREAM_DATA_DIR, { recursive: true });
    const index = await openChunkIndex({
      sqlitePath: path.join(config.MEMSTREAM_DATA_DIR, 'index.sqlite'),
      ...(config.QDRANT_URL ? { qdrantUrl: config.QDRANT_URL } : {}),
      ...(config.QDRANT_API_KEY ? { qdrantApiKey: config.QDRANT_API_KEY } : {}),
    });
    const ports = {
      index,
      documentScope: scopeFromLog(bus),
      isDeleted: async (id: string) => (await latestRevision(bus, id)).deleted,
    };
    return {
      handle: createIndexHandler(ports),
      more: [{ consumer: 'indexerMeta' as const, handle: createMetadataHandler(ports), skipStale: true }],
      close: () => index.close(),
    };
  },
});
