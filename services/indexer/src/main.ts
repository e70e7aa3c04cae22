// First: the OpenTelemetry SDK starts before any application module is loaded.
import '@memstream/telemetry';
import { mkdirSync } from 'node:fs';
import { DEFAULT_BATCH, startWorker } from '@memstream/bus';
import { ChunkIndexSet } from '@memstream/chunk-index';
import { DEFAULT_INDEX } from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import { loadConfig } from './config.js';
import { createIndexHandler, createMetadataHandler } from './handlers/index.js';
import { endedSinceFromLog, stateFromLog } from './adapters/scope-from-log.js';
import { modelIndexes } from './adapters/model-indexes.js';

const config = loadConfig();
const log = createLogger('indexer', { level: config.LOG_LEVEL });

await startWorker({
  consumer: 'indexer',
  // Its stage and status come from its row in the pipeline table; the stale-work rule is the
  // handler's, with the reads it makes anyway (handlers/index.ts).
  skipStale: false,
  natsUrl: config.NATS_URL,
  ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS,
  concurrency: config.INDEXER_CONCURRENCY,
  // A batch is one transaction per index: one at a time, so batches grow with the load (group commit).
  batch: { ...DEFAULT_BATCH, serial: true },
  log,
  setup: async (bus) => {
    mkdirSync(config.MEMSTREAM_DATA_DIR, { recursive: true });
    // One index per embedding model (NATS KV memstream-config/embedding names them); `default` is index.sqlite.
    const indexes = new ChunkIndexSet({ dataDir: config.MEMSTREAM_DATA_DIR, qdrantUrl: config.QDRANT_URL, qdrantApiKey: config.QDRANT_API_KEY });
    const index = await indexes.get(DEFAULT_INDEX);
    const ports = {
      index,
      documentState: stateFromLog(bus),
      endedSince: endedSinceFromLog(bus),
      ...(await modelIndexes(bus, indexes)),
    };
    return {
      handleBatch: createIndexHandler(ports),
      more: [{ consumer: 'indexerMeta' as const, handle: createMetadataHandler(ports), skipStale: true }],
      ready: () => index.ping(),
      close: () => indexes.close(),
    };
  },
});
